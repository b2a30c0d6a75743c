// (aa)+ written afresh from its description (coli-saar/c-rasp's aa_star): the non-empty words of a's of even
// length. Positions count from 0, so an even length ends at an odd position.
alphabet a b
ends_even(i) = i % 2 == 1
accept = #"b" == 0 && ends_even
