// INCREMENT = { br(x) br(x + 1) : 0 <= x <= 14 } written afresh from its description (coli-saar/c-rasp's
// increment): br(x) is x in binary, least significant digit first, four digits. Digit k of x + 1 is digit k of
// x flipped when every digit below k is 1 (the carry reaches k), else digit k itself.
alphabet 0 1
back4(i, j) = j == i - 4
first_half(i) = i < 4
carry = #"1" - (1 if "1" else 0) == #true - 1
successor_is_one = first_half && (("1" && !carry) || ("0" && carry))
successor_is_zero = first_half && !successor_is_one
matches = !first_half && (("1" && #[back4] successor_is_one > 0) || ("0" && #[back4] successor_is_zero > 0))
accept = #true == 8 && #matches == 4 && #("0" && first_half) > 0
