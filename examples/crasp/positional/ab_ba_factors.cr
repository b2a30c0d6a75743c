// As many factors ab as factors ba (over {a, b}: exactly the words whose first and last letters agree).
alphabet a b
before(i, j) = j == i - 1
ab_ends_here = "b" && #[before] "a" > 0
ba_ends_here = "a" && #[before] "b" > 0
accept = #ab_ends_here == #ba_ends_here
