// The first letter equals the last one: a guard that reads the first letter (j == 0).
alphabet a b
first(i, j) = j == 0
starts_with_a = #[first] "a" > 0
accept = (starts_with_a && "a") || (!starts_with_a && "b")
