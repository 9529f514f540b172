"""Retrieval metrics: ours against pytrec_eval (trec_eval) on the same synthetic run.

    python bench/retrieval_bench.py [--cases 100000] [--ids 100] [--k 10] [--seed 0]

Needs the ``bench`` extra (``pip install -e '.[bench]'``, which installs pytrec-eval-terrier).

Data: every case retrieves ``--ids`` distinct ids from a pool of 1,000, with 1 to 10 relevant
ids graded 1 to 3, about half of them planted in the ranking at random ranks. Both sides get the
same ranking (pytrec_eval as scores ``ids - rank``, so its sort reproduces the order) and the
same grades. Timed: our five metrics for every case with :func:`retrieval_scores` (linear gain),
against ``RelevanceEvaluator(...)`` construction plus ``evaluate`` for P@k, recall@k,
recip_rank, ndcg_cut@k and success@k. Building each side's input structures is not timed.

Where the definitions agree the per-case values must match to 1e-9:

* P@k: both divide by k, also when fewer than k ids were retrieved.
* recall@k: both divide by the number of ids with a positive grade.
* reciprocal rank: both over the whole ranking.
* nDCG@k: trec_eval's ndcg_cut is our linear gain (grade itself); ideal DCG over the best k
  grades. Our ``exp2`` gain (2^g - 1) has no trec_eval counterpart and is not compared.
* hit rate@k is trec_eval's success@k.

Where they differ (not exercised here, by construction): we collapse duplicate ids to their
first rank, while a trec_eval run cannot hold a duplicate (the run is a dict); trec_eval orders
by score and breaks ties by document id, while we keep the pipeline's order as given.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from gate.metrics.retrieval import retrieval_scores


def make_data(cases: int, ids: int, seed: int) -> tuple[list[list[str]], list[dict[str, int]]]:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(1000)]
    rankings: list[list[str]] = []
    gradings: list[dict[str, int]] = []
    for _ in range(cases):
        ranked = rng.sample(pool, ids)
        relevant = rng.sample(pool, rng.randint(1, 10))
        grades = {d: rng.randint(1, 3) for d in relevant}
        present = set(ranked)
        for d in relevant:
            if d not in present and rng.random() < 0.5:
                # overwrite a position: the ranking stays free of duplicates
                present.discard(ranked[(slot := rng.randrange(ids))])
                ranked[slot] = d
                present.add(d)
        rankings.append(ranked)
        gradings.append(grades)
    return rankings, gradings


def run_ours(rankings: list[list[str]], gradings: list[dict[str, int]], k: int) -> tuple[float, list]:
    start = time.perf_counter()
    results = [
        retrieval_scores(ranked, grades.keys(), k, grades=grades, gain="linear")
        for ranked, grades in zip(rankings, gradings, strict=True)
    ]
    return time.perf_counter() - start, results


def run_pytrec(
    rankings: list[list[str]], gradings: list[dict[str, int]], k: int
) -> tuple[float, float, dict]:
    import pytrec_eval

    start = time.perf_counter()
    qrels = {f"q{i}": grades for i, grades in enumerate(gradings)}
    run = {f"q{i}": {d: float(len(r) - rank) for rank, d in enumerate(r)} for i, r in enumerate(rankings)}
    build = time.perf_counter() - start
    start = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"P.{k}", f"recall.{k}", "recip_rank", f"ndcg_cut.{k}", f"success.{k}"}
    )
    scores = evaluator.evaluate(run)
    return time.perf_counter() - start, build, scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--ids", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import pytrec_eval  # noqa: F401
    except ImportError:
        print("pytrec_eval is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1

    k = args.k
    rankings, gradings = make_data(args.cases, args.ids, args.seed)
    ours_s, ours = run_ours(rankings, gradings, k)
    theirs_s, build_s, theirs = run_pytrec(rankings, gradings, k)

    pairs = {
        "precision@k vs P": ("precision_at_k", f"P_{k}"),
        "recall@k vs recall": ("recall_at_k", f"recall_{k}"),
        "RR vs recip_rank": ("reciprocal_rank", "recip_rank"),
        "nDCG@k (linear) vs ndcg_cut": ("ndcg_at_k", f"ndcg_cut_{k}"),
        "hit_rate@k vs success": ("hit_rate_at_k", f"success_{k}"),
    }
    print(f"retrieval metrics, {args.cases:,} cases x {args.ids} retrieved ids, k={k}, seed {args.seed}")
    print(f"{'':32}{'ours':>12}{'pytrec_eval':>14}")
    print(f"{'time (s)':32}{ours_s:12.3f}{theirs_s:14.3f}")
    print(f"{'cases per second':32}{args.cases / ours_s:12,.0f}{args.cases / theirs_s:14,.0f}")
    print(f"ratio ours / pytrec_eval: {ours_s / theirs_s:.2f} (goal <= 2.00)")
    print(f"(not timed: building pytrec_eval's input dicts took {build_s:.3f} s)")
    print("maximum per-case absolute difference:")
    worst_all = 0.0
    for label, (ours_field, their_key) in pairs.items():
        worst = max(abs(getattr(o, ours_field) - theirs[f"q{i}"][their_key]) for i, o in enumerate(ours))
        worst_all = max(worst_all, worst)
        print(f"  {label:32}{worst:.3e}")
    print("agreement within 1e-9:", "yes" if worst_all <= 1e-9 else "NO")
    return 0 if worst_all <= 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
