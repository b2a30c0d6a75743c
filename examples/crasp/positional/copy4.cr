// COPY4 = { ww : w in {a, b, c}^4 } written afresh from its description (coli-saar/c-rasp's copy4): eight
// letters, each of the last four equal to the letter four positions before it.
alphabet a b c
back4(i, j) = j == i - 4
second_half(i) = i >= 4
differs = ("a" && #[back4] "a" == 0) || ("b" && #[back4] "b" == 0) || ("c" && #[back4] "c" == 0)
accept = #true == 8 && #(second_half && differs) == 0
