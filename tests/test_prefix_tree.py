"""The prefix-tree evaluator (``batched.prefix_tree``), its int64 LayerNorm (``normalization.layer_norm_split``) and
engine enumerate's prefix-tree scan (``engines.enumerate.prefix_scan``).

Where the numbers come from: every readout is compared with the reference interpreter run on the whole prefix
(the semantics); the split LayerNorm with the Python-integer kernel (itself checked against the interpreter by
test_batched_differential); tree sizes by hand (the prefixes of the words of a+b+a+ up to 12 letters: a^n for n <= 10,
a^i b^j for i + j <= 11, the C(12, 3) words, and the root); the mutated L_3 model's least failing word over
(a+b+){1,2}a+ by test_language_domain's independent scan ('ababa', position 3).
"""

from fractions import Fraction

import numpy as np
import pytest

from test_language_domain import L3, mutated
from verify_tf.batched import kernels, normalization
from verify_tf.batched.backends import WIDE
from verify_tf.batched.prefix_tree import PrefixTreeEvaluator
from verify_tf.builders.random_model import RandomConfig, random_model
from verify_tf.contract import CountingGoal
from verify_tf.engines.base import Run
from verify_tf.engines.enumerate import prefix_scan
from verify_tf.engines.enumerate.prefix_scan import _Tree, cumulative_weights, next_limit
from verify_tf.executors import InProcess
from verify_tf.regular import RegexLanguage
from verify_tf.runner import Overrides, check_all, task_of
from verify_tf.semantics import evaluate
from verify_tf.semantics.arithmetic import Fixed
from verify_tf.spec import load_spec_text

CONFIGS = {
    "softmax": {},
    "hardmax": {"scoring": "hardmax"},
    "post-LN, 2 layers": {"layernorm": "post", "layers": 2},
    "pre-LN, APE, final norm": {"layernorm": "pre", "absolute_pe": True, "final_norm": True},
    "RoPE": {"positional": "rope", "key_dim": 4},
    "ALiBi": {"positional": "alibi"},
    "RPE, hardmax": {"positional": "rpe", "scoring": "hardmax"},
    "URPE": {"positional": "urpe"},
    "2 heads, no BOS": {"heads": 2, "bos": None},
}


def causal_model(**config) -> object:
    """A random causal softmax model over {a, b} with BOS, width 4 unless ``config`` says otherwise."""
    defaults = {"width": 4, "ffn_width": 4, "scoring": "softmax", "causal": True, "alphabet": ("a", "b"), "bos": "^"}
    return random_model(RandomConfig(**{**defaults, **config}))


def every_prefix(model, arith, longest: int):
    """(prefix, readout) of every string over {a, b} up to ``longest``, level by level through the tree."""
    evaluator = PrefixTreeEvaluator(model, arith, ["a", "b"], longest)
    level = evaluator.root()
    for _ in range(longest):
        up = np.repeat(np.arange(len(level)), 2)
        level = evaluator.children(level, up, np.tile(np.arange(2), len(level)))
        for row, numerator in zip(evaluator.rows(level), level.readout):
            yield "".join("ab"[i] for i in row), Fraction(int(numerator), evaluator.den)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_prefix_reads_out_what_the_interpreter_computes(name: str) -> None:
    model, arith = causal_model(**{"seed": 3, **CONFIGS[name]}), Fixed(16, 8)
    seen = list(every_prefix(model, arith, 4))
    assert len(seen) == 2 + 4 + 8 + 16
    for prefix, readout in seen:
        assert readout == evaluate(model, arith, tuple(prefix)).readout[-1], prefix


def test_a_24_bit_post_ln_model_goes_through_the_split_layer_norm(monkeypatch) -> None:
    """24.14 with LayerNorm: the radicand needs ~80 bits (guarded), so the int64 digit kernel runs, and agrees."""
    taken = []
    split = normalization.layer_norm_split
    monkeypatch.setattr(normalization, "layer_norm_split", lambda *a: taken.append(1) or split(*a))
    model, arith = causal_model(seed=1, layers=2, layernorm="post"), Fixed(24, 14)
    for prefix, readout in every_prefix(model, arith, 3):
        assert readout == evaluate(model, arith, tuple(prefix)).readout[-1], prefix
    assert len(taken) == 4 * 4  # two LayerNorms per layer, two layers; one call per level: BOS's and 3 more


def test_the_split_layer_norm_equals_the_python_integer_kernel_on_extreme_rows() -> None:
    """d = 32, 24.14 (the yang exports' format): random rows and the extremes (the format's ends, a constant
    row: Var = 0, only eps under the root), against ``layer_norm`` on Python integers."""
    model = causal_model(seed=0, width=32, layernorm="post")
    evaluator = PrefixTreeEvaluator(model, Fixed(24, 14), ["a", "b"], 2)
    plan = evaluator.program.blocks[0].attention.norm
    rng = np.random.default_rng(0)
    top = (1 << 23) - 1
    rows = [
        rng.integers(-top - 1, top + 1, size=(500, 1, 32)),
        rng.integers(-300, 300, size=(500, 1, 32)),
        np.full((1, 1, 32), top),
        np.full((1, 1, 32), -top - 1),
        np.tile(np.array([top, -top - 1]), 16).reshape(1, 1, 32),
        np.zeros((1, 1, 32), dtype=np.int64),
    ]
    z = np.concatenate(rows).astype(np.int64) // plan.to_mantissa
    ours = normalization.layer_norm_split(plan, z)
    assert ours is not None
    wide = normalization.layer_norm(
        kernels.Context(evaluator.ops, evaluator.twins).wide_plan(plan), z.astype(object), WIDE, None
    )
    assert (ours == wide.astype(np.int64)).all()


def test_the_tree_of_a_language_is_counted_and_completed_by_hand() -> None:
    language = RegexLanguage.compile("a+b+a+", ("a", "b"))

    def state(word: str) -> int:
        q = 0
        for letter in word:
            q = language.delta[q]["ab".index(letter)]
        return q

    prefix = _Tree(language, CountingGoal(("a", "b"), 1, 12, least="prefix", language=language))
    assert language.prefix_counts(1, 12)[:4] == [1, 1, 2, 4]  # '', a, aa ab, aaa aab aba abb (abb begins abba)
    # the prefixes of the words up to 12: a^n (n <= 10: two blocks must follow), a^i b^j (i + j <= 11: C(11, 2) = 55),
    # the 220 = C(12, 3) words themselves, and the root
    assert sum(language.prefix_counts(1, 12)) == 10 + 55 + 220 + 1
    assert prefix.least_word((0, 1), state("ab")) == (0, 1, 0)  # 'ab' is completed by one a: 'aba'
    assert prefix.least_word((0, 1, 0), state("aba")) == (0, 1, 0)  # a word already
    # min-length 5: 'ab' needs three more letters; 'abaaa' < 'abbaa' < 'abbba'
    longer = _Tree(language, CountingGoal(("a", "b"), 5, 12, least="prefix", language=language))
    assert longer.least_word((0, 1), state("ab")) == (0, 1, 0, 0, 0)
    words = _Tree(language, CountingGoal(("a", "b"), 1, 12, least="string", language=language))
    assert words.checked(3, np.array([state("abb"), state("aba")])).tolist() == [False, True]  # words only
    assert words.least_word((0, 1, 0), state("aba")) == (0, 1, 0)


def test_the_next_walk_is_as_deep_as_the_budget_is_expected_to_reach() -> None:
    sizes = [1] + [n for n in range(1, 101)]  # n nodes of depth n: weight n·(n + 50)
    weights = [s * (d + 50) for d, s in enumerate(sizes)]
    assert next_limit(cumulative_weights(sizes), 12, 1.0, sum(weights)) == 100  # the whole tree fits
    within = max(m for m in range(13, 101) if sum(weights[: m + 1]) <= 0.9 * 10_000)
    # hand: 50 + Σ_{n<=16} n(n + 50) = 50 + 1,496 + 6,800 = 8,346 <= 0.9 · 10,000 < 50 + 1,785 + 7,650 (n <= 17)
    assert next_limit(cumulative_weights(sizes), 12, 1.0, 10_000) == within == 16
    assert next_limit(cumulative_weights(sizes), 99, 1.0, 1.0) == 100  # nothing fits: try it all, the budget ends it


def run_mutated(regex: str, longest: int, options: str, **overrides) -> object:
    spec = load_spec_text(mutated(regex, longest, f"crasp-equivalence: {{program: {L3}, {options}}}"), "spec.yaml")
    (verdict,) = check_all([spec], Overrides(**overrides))
    return verdict


def test_the_scan_finds_the_least_failing_word_and_proves_the_words_it_labels_right() -> None:
    refuted = run_mutated("(a+b+){1,2}a+", 9, "mode: prefix, engine: enumerate")
    assert refuted.statistics["prefix_tree"] is True and refuted.statistics["least"] is True
    assert (refuted.counterexample["string"], refuted.counterexample["position"]) == ("ababa", 3)
    # the words before it: aba, aaba, abaa, abba (length <= 4; a word of the second form has five letters at least)
    assert refuted.statistics["every_input_up_to_length"] == 4 and refuted.statistics["inputs_checked"] == 4
    proved = run_mutated("a+b+a+", 12, "mode: prefix, engine: enumerate")
    assert proved.status == "proved"
    assert proved.statistics["prefix_tree_nodes"] == 10 + 55 + 220 + 1  # as in the test above
    assert proved.statistics["every_input_up_to_length"] == 12 and proved.statistics["inputs_checked"] == 220
    accept = run_mutated("(a+b+){1,2}a+", 9, "engine: enumerate")
    assert accept.statistics["prefix_tree"] is True
    assert accept.counterexample["string"] == "ababa" and accept.counterexample["position"] == 4


def test_a_certified_check_scans_padded_words_and_agrees(tmp_path) -> None:
    """--certify digests the padded scan's chunks: the prefix tree steps aside, and the verdict is the same."""
    verdict = run_mutated("(a+b+){1,2}a+", 9, "mode: prefix, engine: enumerate", certify_dir=tmp_path)
    assert "prefix_tree" not in verdict.statistics
    assert (verdict.counterexample["string"], verdict.counterexample["position"]) == ("ababa", 3)


class Batches:
    """A deadline that expires after ``allowed`` checks (the scan checks it once per batch): no clock involved."""

    def __init__(self, allowed: int):
        self.allowed = allowed

    def expired(self) -> bool:
        self.allowed -= 1
        return self.allowed < 0

    def remaining(self) -> float:
        return 1e9

    def elapsed(self) -> float:
        return 0.0


def test_a_budget_that_ends_in_a_walk_proves_the_words_of_the_walks_before_it() -> None:
    """L_3 up to 16: the first walk (to depth 2, an eighth) takes 2 batches (depths 1 and 2), the second is to
    the whole tree; a budget of 5 batches ends inside the second, so every word up to 2 letters is what is proved."""
    spec = load_spec_text(mutated("a+b+a+", 16, f"crasp-equivalence: {{program: {L3}, mode: prefix}}"), "spec.yaml")
    task = task_of(spec, spec.properties[0], Overrides())
    verdict = prefix_scan.check(task, Run(InProcess(), Batches(5)))  # type: ignore[arg-type]
    assert verdict.status == "unknown"
    assert verdict.statistics["walks"] == [2, 16] and verdict.statistics["every_input_up_to_length"] == 2
    # walk 1: a | aa ab (3 nodes, 2 checks); walk 2, three more batches: a | aa ab | aaa aab aba abb
    assert verdict.statistics["prefixes_evaluated"] == 3 + 7
    assert "every word up to length 2 checked" in verdict.detail
