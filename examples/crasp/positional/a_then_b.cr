// Every a is immediately followed by b: no position after an a holds anything else, and the word does not end
// in a.
alphabet a b
before(i, j) = j == i - 1
broken_here = !"b" && #[before] "a" > 0
accept = #broken_here == 0 && !"a"
