// COPY4 = { ww : w in {a, b, c}^4 } (coli-saar/c-rasp's copy4, in verify-tf's .cr): eight letters whose
// second half repeats the first, e.g. abcbabcb. Positions count from 0.
alphabet a b c
four_back(i, j) = j == i - 4       // a binary predicate: #[four_back] P counts the j <= i with j == i - 4
same_as_four_back = ("a" && #[four_back] "a" > 0) || ("b" && #[four_back] "b" > 0) || ("c" && #[four_back] "c" > 0)
length = #true
// a word of length 8 repeats exactly at positions 4..7 iff it repeats at four positions
accept = length == 8 && 2*#same_as_four_back == length
