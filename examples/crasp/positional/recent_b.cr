// Some b among the last three letters: a guard over a window of distances (j >= i - 2 with j <= i).
alphabet a b
recent(i, j) = j >= i - 2
accept = #[recent] "b" > 0
