"""Sampling: the keyed random numbers, each stage of the chain on crafted logits, the chain's order,
and the distribution a seeded sampler draws from."""

from __future__ import annotations

import numpy as np
import pytest

from llamay.engine.sampling import (
    Candidates,
    Sampler,
    SamplingParams,
    draw,
    min_p,
    top_k,
    top_p,
    uniform,
    uniforms,
)

ALL = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}  # every cutting stage off


def logits_of(probabilities) -> np.ndarray:
    return np.log(np.asarray(probabilities, dtype=np.float32))


def candidates(probabilities) -> Candidates:
    return top_k(logits_of(probabilities), 0)


def draws(params: SamplingParams, logits: np.ndarray, n: int, sequence: int = 0) -> np.ndarray:
    sampler = Sampler(params, sequence)
    return np.array([sampler.sample(logits, step) for step in range(n)])


# --- the keyed generator -------------------------------------------------------------------------


def test_uniform_is_a_pure_function_of_its_key():
    # Pinned values: a seed must give the same text in every version of llamay.
    assert uniform(0, 0, 0) == uniforms(0, 0, np.array([0]))[0]
    assert uniform(42, 0, 7) == uniform(42, 0, 7)
    assert uniform(0, 0, 0) == 0.13870941014555427
    assert uniform(1, 0, 5) == 0.1358523770556529
    assert uniform(1, 3, 5) == 0.9079582479452261
    assert uniform(-1, 0, 5) == uniform(2**64 - 1, 0, 5)  # seeds are taken modulo 2**64


def test_uniforms_vectorised_equals_one_at_a_time():
    steps = np.arange(0, 5000, 7)
    assert np.array_equal(uniforms(9, 2, steps), [uniform(9, 2, int(s)) for s in steps])


def test_each_part_of_the_key_changes_the_stream():
    steps = np.arange(1000)
    base = uniforms(5, 0, steps)
    for other in (uniforms(6, 0, steps), uniforms(5, 1, steps), uniforms(5, 0, steps + 1000)):
        assert np.count_nonzero(base == other) == 0


def test_uniforms_are_uniform_and_uncorrelated():
    u = uniforms(123, 4, np.arange(1_000_000))
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=100, range=(0, 1))[0]
    chi2 = float(((counts - 10_000) ** 2 / 10_000).sum())
    assert chi2 < 180  # 99 degrees of freedom: p < 1e-5 beyond 180
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.005


# --- the stages, exactly -------------------------------------------------------------------------


def test_top_k_keeps_the_k_highest_sorted_ties_by_lowest_id():
    logits = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 2.0, -1.0], dtype=np.float32)
    kept = top_k(logits, 4)
    assert kept.ids.tolist() == [1, 3, 2, 4]
    assert kept.logits.tolist() == [3.0, 3.0, 2.0, 2.0]
    assert top_k(logits, 1).ids.tolist() == [1]
    assert top_k(logits, 0).ids.tolist() == [1, 3, 2, 4, 5, 0, 6]  # off: all, sorted
    assert top_k(logits, 99).ids.tolist() == [1, 3, 2, 4, 5, 0, 6]


def test_top_k_over_a_large_row_matches_a_full_sort():
    rng = np.random.default_rng(7)
    row = rng.normal(size=262_144).astype(np.float32)
    row[[5, 100_000, 262_143]] = row.max()  # ties at the top
    order = np.lexsort((np.arange(row.size), -row))
    for k in (1, 3, 40, 1000):
        assert top_k(row, k).ids.tolist() == order[:k].tolist()
    small = rng.integers(-2, 2, size=300).astype(np.float32)  # many ties at the cut
    order = np.lexsort((np.arange(small.size), -small))
    for k in (1, 7, 64, 299):
        assert top_k(small, k).ids.tolist() == order[:k].tolist()


def test_top_p_keeps_the_smallest_head_reaching_p():
    c = candidates([0.5, 0.3, 0.15, 0.05])
    assert top_p(c, 0.49).ids.tolist() == [0]
    assert top_p(c, 0.51).ids.tolist() == [0, 1]
    assert top_p(c, 0.79).ids.tolist() == [0, 1]
    assert top_p(c, 0.81).ids.tolist() == [0, 1, 2]
    assert top_p(c, 0.96).ids.tolist() == [0, 1, 2, 3]
    assert top_p(c, 1e-9).ids.tolist() == [0]  # at least one token
    assert top_p(c, 1.0) is c


def test_min_p_keeps_tokens_at_least_p_times_the_best():
    c = candidates([0.5, 0.3, 0.15, 0.05])
    assert min_p(c, 0.61).ids.tolist() == [0]
    assert min_p(c, 0.59).ids.tolist() == [0, 1]
    assert min_p(c, 0.29).ids.tolist() == [0, 1, 2]
    assert min_p(c, 0.09).ids.tolist() == [0, 1, 2, 3]
    assert min_p(c, 1.0).ids.tolist() == [0]
    assert min_p(c, 0.0) is c


def test_draw_maps_the_uniform_onto_cumulative_shares():
    c = candidates([0.5, 0.3, 0.2])
    assert [draw(c, 1.0, u) for u in (0.0, 0.49, 0.51, 0.79, 0.81, 0.999999)] == [0, 0, 1, 1, 2, 2]
    # temperature 2: shares proportional to sqrt(p)
    shares = np.sqrt([0.5, 0.3, 0.2]) / np.sqrt([0.5, 0.3, 0.2]).sum()
    edge = shares[0]
    assert draw(c, 2.0, edge - 1e-6) == 0 and draw(c, 2.0, edge + 1e-6) == 1


def test_greedy_is_argmax_with_lowest_id_on_ties_whatever_the_seed():
    logits = np.array([0.5, 2.0, -1.0, 2.0], dtype=np.float32)
    for seed in (0, 1, 99):
        assert draws(SamplingParams(temperature=0, seed=seed), logits, 20).tolist() == [1] * 20
    row = np.random.default_rng(3).normal(size=262_144).astype(np.float32)
    assert Sampler(SamplingParams(temperature=0)).sample(row, 0) == int(np.argmax(row))


def test_top_p_0_is_greedy_whatever_the_temperature():
    """OpenAI's minimum top_p keeps only the most likely token (the lowest id among equals)."""
    logits = np.array([0.5, 2.0, -1.0, 2.0], dtype=np.float32)
    for seed in (0, 1, 99):
        params = SamplingParams(temperature=1.5, top_p=0, top_k=0, min_p=0, seed=seed)
        assert draws(params, logits, 20).tolist() == [1] * 20


# --- the chain -----------------------------------------------------------------------------------


def test_top_p_sees_the_distribution_left_by_top_k():
    logits = logits_of([0.4, 0.3, 0.3])
    # after top-k 2 the head is 0.4/0.7 = 0.57 >= 0.5: only token 0 survives
    after_top_k = draws(
        SamplingParams(temperature=1, top_k=2, top_p=0.5, min_p=0, seed=1), logits, 300
    )
    assert set(after_top_k.tolist()) == {0}
    # without top-k, 0.4 < 0.5: tokens 0 and 1 survive
    alone = draws(SamplingParams(temperature=1, top_k=0, top_p=0.5, min_p=0, seed=1), logits, 300)
    assert set(alone.tolist()) == {0, 1}


def test_min_p_cuts_before_temperature_flattens():
    logits = logits_of([0.5, 0.3, 0.2])
    # 0.2 < 0.5 * 0.5 on the raw logits; at temperature 5 it would pass (0.4 ** 0.2 = 0.83)
    tokens = draws(SamplingParams(temperature=5, top_k=0, top_p=1, min_p=0.5, seed=2), logits, 400)
    assert set(tokens.tolist()) == {0, 1}


def test_seeded_draws_follow_the_tempered_distribution():
    probabilities = np.array([0.4, 0.25, 0.2, 0.1, 0.05])
    logits = logits_of(probabilities)
    n = 8000
    for temperature in (1.0, 0.5):
        tokens = draws(SamplingParams(temperature=temperature, seed=11, **ALL), logits, n)
        expected = probabilities ** (1 / temperature)
        expected /= expected.sum()
        counts = np.bincount(tokens, minlength=5)
        sigma = np.sqrt(n * expected * (1 - expected))
        assert np.all(np.abs(counts - n * expected) < 4.5 * sigma), (temperature, counts)


def test_default_chain_draws_only_what_every_stage_keeps():
    row = np.random.default_rng(5).normal(scale=4, size=262_144).astype(np.float32)
    params = SamplingParams(seed=3)  # top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    allowed = min_p(top_p(top_k(row, 40), 0.95), 0.05)
    tokens = draws(params, row, 3000)
    assert set(tokens.tolist()) <= set(allowed.ids.tolist())
    assert len(set(tokens.tolist())) > 1
    expected = np.exp((allowed.logits - allowed.logits[0]) / 0.8)
    expected /= expected.sum()
    frequency = np.mean(tokens == allowed.ids[0])
    assert abs(frequency - expected[0]) < 4.5 * np.sqrt(expected[0] * (1 - expected[0]) / 3000)


def test_a_sequence_draws_the_same_tokens_alone_or_interleaved():
    rng = np.random.default_rng(9)
    rows = rng.normal(scale=2, size=(64, 1000)).astype(np.float32)
    params = SamplingParams(temperature=1.0, seed=77, **ALL)
    alone = [Sampler(params, sequence=0).sample(row, step) for step, row in enumerate(rows)]
    first, second = Sampler(params, sequence=0), Sampler(params, sequence=1)
    interleaved, others = [], []
    for step, row in enumerate(rows):
        others.append(second.sample(row[::-1].copy(), step))
        interleaved.append(first.sample(row, step))
    assert interleaved == alone
    assert [Sampler(params, sequence=1).sample(row, s) for s, row in enumerate(rows)] != alone


def test_a_sampler_without_a_seed_draws_one_and_reports_it():
    a, b = Sampler(SamplingParams()), Sampler(SamplingParams())
    assert isinstance(a.seed, int) and a.seed != b.seed
    assert Sampler(SamplingParams(seed=5)).seed == 5


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"top_k": -1},
        {"top_p": -0.1},
        {"top_p": 1.5},
        {"min_p": -0.1},
        {"min_p": 1.1},
    ],
)
def test_out_of_range_parameters_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SamplingParams(**bad)


# --- logit bias, penalties, typical --------------------------------------------------------------


def test_a_negative_infinite_bias_bans_a_token_even_for_greedy():
    row = logits_of([0.5, 0.3, 0.2])
    params = SamplingParams(temperature=0, logit_bias={0: float("-inf")})
    assert Sampler(params).sample(row, 0) == 1
    boosted = SamplingParams(temperature=0, logit_bias={2: 5.0})
    assert Sampler(boosted).sample(row, 0) == 2


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0),
        SamplingParams(temperature=0.8, seed=3),
        SamplingParams(temperature=0, logit_bias={0: float("-inf")}),
        SamplingParams(temperature=0.8, seed=3, repeat_penalty=1.3),
    ],
)
def test_sampling_never_writes_the_callers_logits(params):
    # a read-only view, as a generation passes its context's logits: a write would raise
    row = logits_of([0.4, 0.3, 0.2, 0.1])
    row.flags.writeable = False
    before = row.copy()
    Sampler(params).sample(row, 0, recent=[1, 2], allowed=None)
    Sampler(params).sample(row, 0, recent=[1, 2], allowed=np.array([True, False, True, True]))
    assert np.array_equal(row, before)


def test_a_bias_for_a_token_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="logit_bias names token 7"):
        Sampler(SamplingParams(logit_bias={7: 1.0})).sample(logits_of([0.5, 0.5]), 0)


def test_penalties_follow_llama_cpp():
    from llamay.engine.sampling import apply_penalties

    row = np.array([2.0, -1.0, 0.5, 3.0], dtype=np.float32)
    params = SamplingParams(repeat_penalty=2.0, frequency_penalty=0.25, presence_penalty=0.5)
    apply_penalties(row, np.array([0, 1, 1, 2]), params)
    # seen once: 2/2 - 0.25 - 0.5; seen twice (negative): -1*2 - 0.5 - 0.5; unseen: untouched
    assert row.tolist() == [0.25, -3.0, 0.25 - 0.75, 3.0]


def test_the_penalty_window_is_the_last_repeat_last_n_tokens():
    row = logits_of([0.4, 0.35, 0.25])
    params = SamplingParams(temperature=0, repeat_penalty=4.0, repeat_last_n=2)
    assert Sampler(params).sample(row, 0, recent=[1, 2, 2]) == 0  # 0 not penalized
    assert Sampler(params).sample(row, 0, recent=[2, 0, 2]) == 1  # 0 in the window
    assert Sampler(params).sample(row, 0, recent=[0, 1, 2]) == 0  # 0 outside the window
    off = SamplingParams(temperature=0, repeat_penalty=4.0, repeat_last_n=0)
    assert Sampler(off).sample(row, 0, recent=[0, 0]) == 0


def test_typical_keeps_the_tokens_nearest_the_entropy():
    from llamay.engine.sampling import typical

    probs = np.array([0.5, 0.2, 0.2, 0.1])
    c = candidates(probs)
    entropy = -np.sum(probs * np.log(probs))
    surprise = np.abs(-np.log(probs) - entropy)
    # the brute-force definition: fewest tokens, by closeness to the entropy, reaching p
    order = np.argsort(surprise, kind="stable")
    for p in (0.3, 0.5, 0.9):
        n = int(np.searchsorted(np.cumsum(probs[order]), p)) + 1
        expected = sorted(order[:n].tolist(), key=lambda i: -probs[i])
        assert typical(c, p).ids.tolist() == expected
    assert typical(c, 1.0) is c


def test_the_grammar_mask_leaves_only_allowed_tokens():
    row = logits_of([0.6, 0.3, 0.1])
    allowed = np.array([False, False, True])
    assert Sampler(SamplingParams(temperature=0)).sample(row, 0, allowed=allowed) == 2
    sampler = Sampler(SamplingParams(seed=1, **ALL))
    assert {sampler.sample(row, s, allowed=np.array([False, True, True])) for s in range(50)} == {
        1,
        2,
    }
