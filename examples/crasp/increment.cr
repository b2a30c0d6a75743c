// INCREMENT = { br(x) br(x + 1) : 0 <= x <= 14 } (coli-saar/c-rasp's increment, in verify-tf's .cr), where
// br(x) is x in binary, least significant digit first, padded to four digits: 0000 1000, 1000 0100,
// 1100 0010, 1010 0110, ... Positions count from 0.
alphabet 0 1
four_back(i, j) = j == i - 4
length = #true
ones_before = #"1" - (1 if "1" else 0)                 // the 1s strictly before this position
carry = ones_before == length - 1                      // every digit before this one is 1
next_digit = ("1" && !carry) || ("0" && carry)         // this digit of x + 1 (in the first half)
copied = ("1" && #[four_back] next_digit > 0) || ("0" && #[four_back] !next_digit > 0)
not_all_ones = #("0" && length <= 4) > 0               // x = 15 has no four-digit successor
accept = length == 8 && #copied == 4 && not_all_ones
