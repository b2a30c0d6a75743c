// Σ* ab Σ* written afresh from its description (coli-saar/c-rasp's contains_ab): some b right after an a.
alphabet a b
before(i, j) = j == i - 1
ab_ends_here = "b" && #[before] "a" > 0
accept = #ab_ends_here > 0
