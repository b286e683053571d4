"""The workload generator: key counts, uniqueness, multiplicity, realised hit rate, misses
where they were asked for, skew, and determinism per seed (the same on every device)."""

from __future__ import annotations

import hashlib
import textwrap

import numpy as np
import pytest
from pydantic import ValidationError
from support.helpers import agrees_in_the_simulator

from indexzoo.devices import to_numpy
from indexzoo.errors import ConfigError
from indexzoo.tools import workloads
from indexzoo.tools.workloads import Workload, generate, mix64, permute_bits, unmix64


def host(data, attr):  # type: ignore[no-untyped-def]
    return to_numpy(getattr(data, attr))


@pytest.mark.parametrize("dist", ["dense", "uniform", "clustered", "zipf"])
@pytest.mark.parametrize("bits", [32, 64])
def test_keys_are_unique_with_the_asked_count_and_dtype(dist: str, bits: int, device: str) -> None:
    w = Workload(n_keys=5000, key_bits=bits, distribution=dist, n_lookups=0, cluster_size=64)
    keys = host(generate(w, device), "keys")
    assert keys.dtype == np.dtype(f"uint{bits}") and keys.shape == (5000,)
    assert np.unique(keys).shape[0] == 5000


@pytest.mark.parametrize("m", [1, 2, 7, 64])
def test_multiplicity_repeats_every_distinct_key(m: int, device: str) -> None:
    w = Workload(n_keys=64 * 7 * 3, multiplicity=m, n_lookups=0)
    keys = host(generate(w, device), "keys")
    _, counts = np.unique(keys, return_counts=True)
    assert (counts == m).all()


@pytest.mark.parametrize("hit_rate", [1.0, 0.9, 0.5, 0.01, 0.0])
@pytest.mark.parametrize("out_share", [0.0, 0.3, 1.0])
def test_realised_hit_rate_and_miss_kinds(hit_rate: float, out_share: float, device: str) -> None:
    w = Workload(n_keys=1 << 12, n_lookups=20000, hit_rate=hit_rate, out_of_range_share=out_share)
    data = generate(w, device)
    keys, q = host(data, "keys"), host(data, "queries")
    hit = np.isin(q, keys)
    assert abs(hit.mean() - hit_rate) <= 0.01 and hit.sum() == data.n_hits
    misses = q[~hit]
    outside = (misses < keys.min()) | (misses > keys.max())
    if misses.size:
        assert abs(outside.mean() - out_share) <= 0.01


def test_range_lookups_cover_exactly_range_hits_distinct_keys(device: str) -> None:
    w = Workload(n_keys=3000, multiplicity=3, n_lookups=500, range_hits=17)
    data = generate(w, device)
    keys, lo, hi = host(data, "keys"), host(data, "lo"), host(data, "hi")
    distinct = np.unique(keys)
    covered = np.searchsorted(distinct, hi, "right") - np.searchsorted(distinct, lo, "left")
    assert (covered == 17).all()


def test_lookup_skew_concentrates_on_few_keys(device: str) -> None:
    def top_share(s: float) -> float:
        w = Workload(n_keys=1 << 14, n_lookups=1 << 15, lookup_zipf=s)
        _, counts = np.unique(host(generate(w, device), "queries"), return_counts=True)
        return float(np.sort(counts)[-10:].sum() / counts.sum())

    assert top_share(0.0) < 0.01 < 0.2 < top_share(1.5)


def test_generation_is_deterministic_per_seed_and_differs_across_seeds(device: str) -> None:
    w = Workload(n_keys=2048, n_lookups=2048, hit_rate=0.7)
    a, b = generate(w, device), generate(w, device)
    c = generate(w.model_copy(update={"seed": 43}), device)
    np.testing.assert_array_equal(host(a, "keys"), host(b, "keys"))
    np.testing.assert_array_equal(host(a, "queries"), host(b, "queries"))
    assert not np.array_equal(host(a, "keys"), host(c, "keys"))


def test_sorted_build_and_lookups(device: str) -> None:
    w = Workload(n_keys=1000, n_lookups=1000, sorted_build=True, sorted_lookups=True)
    data = generate(w, device)
    assert (np.diff(host(data, "keys").astype(np.int64)) >= 0).all()
    assert (np.diff(host(data, "queries").astype(np.float64)) >= 0).all()


def test_batches_cut_all_lookups_in_order() -> None:
    data = generate(Workload(n_keys=100, n_lookups=1001, batches=4), "cpu")
    parts = data.batches()
    assert len(parts) == 4
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), data.queries)


def test_every_batch_holds_at_least_one_lookup() -> None:
    with pytest.raises(ValidationError, match="batches=16777216 exceeds n_lookups=10"):
        Workload(n_lookups=10, batches=1 << 24)
    with pytest.raises(ValidationError, match="batches=2 exceeds n_lookups=0"):
        Workload(n_lookups=0, batches=2)
    assert Workload(n_lookups=10, batches=10).batches == 10
    assert Workload(n_lookups=0).batches == 1


def test_a_lookups_sweep_keeps_at_most_one_batch_a_lookup() -> None:
    from indexzoo.tools.bench import sweep_workloads

    base = Workload(n_keys=1 << 12, n_lookups=1 << 16, batches=1 << 14)
    swept = sweep_workloads(base, "lookups", "cpu")
    assert [(w.n_lookups, w.batches) for w in swept[:2]] == [(1 << 13, 1 << 13), (1 << 15, 1 << 14)]


def test_a_workload_describes_itself_with_its_name_escaped() -> None:
    w = Workload(name="bench\x1b[2J\nnext", n_keys=1024, n_lookups=16)
    assert w.describe().startswith("bench\\x1b[2J\\nnext: 2^10 uniform u64 keys")


def test_permute_bits_is_a_bijection() -> None:
    for bits in (1, 5, 12):
        x = np.arange(1 << bits, dtype=np.uint64)
        assert np.unique(permute_bits(x, bits, seed=9)).shape[0] == 1 << bits


def test_impossible_workloads_are_rejected() -> None:
    with pytest.raises(ValidationError, match="multiple of multiplicity"):
        Workload(n_keys=10, multiplicity=3)
    with pytest.raises(ValidationError, match="do not fit in 32 bits"):
        Workload(n_keys=(1 << 32) + 2, key_bits=32)
    with pytest.raises(ValidationError, match="hit_rate"):
        Workload(hit_rate=1.5)


def test_zipf_keys_have_heavy_tailed_gaps(device: str) -> None:
    w = Workload(n_keys=1 << 14, distribution="zipf", key_zipf=1.2, n_lookups=0)
    keys = np.sort(host(generate(w, device), "keys").astype(np.float64))
    gaps = np.diff(keys)
    assert (gaps >= 1).all()
    assert np.median(gaps) <= 2 and gaps.max() > 100 * np.median(gaps)


@pytest.mark.parametrize("key_zipf", [1e-300, 1e-3, 0.5, 8.0])
@pytest.mark.parametrize("bits", [32, 64])
def test_zipf_keys_stay_distinct_for_every_allowed_exponent(key_zipf: float, bits: int,
                                                           device: str) -> None:
    w = Workload(n_keys=100_000, distribution="zipf", key_zipf=key_zipf, key_bits=bits,
                 n_lookups=0)
    keys = host(generate(w, device), "keys")
    assert np.unique(keys).shape[0] == 100_000


def test_uniform_keys_spread_over_the_whole_domain(device: str) -> None:
    keys = host(generate(Workload(n_keys=1 << 14, key_bits=32, n_lookups=0), device), "keys")
    hist = np.histogram(keys.astype(np.float64), bins=16, range=(0, 2.0**32))[0]
    assert hist.min() > 0.8 * hist.mean() and hist.max() < 1.2 * hist.mean()


def test_unmix64_inverts_mix64_and_leaves_its_input_alone() -> None:
    x = np.random.default_rng(1).integers(0, 2**64 - 1, 10_000, dtype=np.uint64, endpoint=True)
    x = np.concatenate([x, np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)])
    before = x.copy()
    assert np.array_equal(unmix64(mix64(x)), x) and np.array_equal(x, before)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000, 4097])
def test_a_shuffle_is_the_order_of_its_random_stream(n: int) -> None:
    """The shuffle sorts the stream and inverts mix64 on it: the argsort of the stream."""
    arr = np.arange(n, dtype=np.int64) * 3
    stream = workloads._random_u64(np, n, 42, 3)
    assert np.array_equal(workloads._shuffle(np, arr, 42, 3), arr[np.argsort(stream)])


#: Workloads over every step of the generator (each distribution, multiplicity, sorted build
#: and lookups, point and range lookups, misses of both kinds, Zipf ranks, no keys), above and
#: below the size where CPU kernels go parallel, with the first 16 hex digits of the SHA-256 of
#: their arrays (keys, queries, lo, hi) and their hits, as the array-module generator of
#: dc56c57 made them: the kernels changed the speed, not the data.
DATA_OF_DC56C57 = [
    ({"n_keys": 5000, "n_lookups": 7000, "hit_rate": 0.7, "out_of_range_share": 0.3},
     "40192d4566118998", 4900),
    ({"n_keys": 5000, "n_lookups": 7000, "hit_rate": 0.7, "out_of_range_share": 0.3,
      "key_bits": 32}, "4d2d25dda1d090f3", 4900),
    ({"n_keys": 4096, "distribution": "dense", "n_lookups": 3000, "hit_rate": 0.8,
      "out_of_range_share": 1.0}, "31f13b6f0a7d0382", 2400),
    ({"n_keys": 4096, "distribution": "clustered", "cluster_size": 64, "n_lookups": 3000,
      "hit_rate": 0.5, "out_of_range_share": 0.5, "key_bits": 32}, "8d34b386ad3188ff", 1500),
    ({"n_keys": 4096, "distribution": "zipf", "key_zipf": 1.2, "n_lookups": 3000,
      "hit_rate": 0.9, "lookup_zipf": 1.1}, "d90916a632d85372", 2700),
    ({"n_keys": 12288, "multiplicity": 3, "n_lookups": 3000, "hit_rate": 0.6,
      "out_of_range_share": 0.2}, "d8089fe475500234", 1800),
    ({"n_keys": 16384, "multiplicity": 4, "n_lookups": 3000, "sorted_build": True,
      "sorted_lookups": True, "hit_rate": 0.9}, "993f8487bb534918", 2700),
    ({"n_keys": 3000, "multiplicity": 3, "n_lookups": 500, "range_hits": 17, "hit_rate": 0.8,
      "out_of_range_share": 0.5}, "3fb0e457ab74c98b", 400),
    ({"n_keys": 3000, "n_lookups": 500, "range_hits": 5, "sorted_lookups": True,
      "hit_rate": 0.9}, "b03e7f4a1b239124", 450),
    ({"n_keys": 100000, "n_lookups": 200000, "hit_rate": 0.95, "lookup_zipf": 0.8, "seed": 7},
     "ae527a77d1e643d2", 190000),
    ({"n_keys": 65536, "n_lookups": 131072, "hit_rate": 0.9, "out_of_range_share": 0.5,
      "key_bits": 32, "seed": 3}, "9d6f28bc2abded9c", 117965),
    ({"n_keys": 65536, "distribution": "dense", "n_lookups": 131072, "multiplicity": 2,
      "hit_rate": 1.0, "seed": 5}, "043ecdfebbe31668", 131072),
    ({"n_keys": 65536, "distribution": "zipf", "key_zipf": 1.5, "n_lookups": 65536,
      "hit_rate": 0.5, "out_of_range_share": 0.5, "sorted_build": True},
     "fae81efa48912892", 32768),
    ({"n_keys": 65536, "distribution": "clustered", "cluster_size": 100, "n_lookups": 65536,
      "range_hits": 9, "hit_rate": 0.7, "out_of_range_share": 0.4}, "ffb2a27059321522", 45875),
    ({"n_keys": 0, "n_lookups": 1000, "hit_rate": 0.0, "key_bits": 32,
      "out_of_range_share": 1.0}, "4f25c5981272ca0b", 0),
    ({"n_keys": 40000, "n_lookups": 40000, "sorted_build": True, "hit_rate": 0.9,
      "key_bits": 32, "lookup_zipf": 0.5}, "c2a5e5c4a6859b9c", 36000),
]


def _digest(data) -> str:  # type: ignore[no-untyped-def]
    h = hashlib.sha256()
    for attr in ("keys", "queries", "lo", "hi"):
        if getattr(data, attr) is not None:
            h.update(np.ascontiguousarray(host(data, attr)).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("fields", "digest", "hits"), DATA_OF_DC56C57,
                         ids=[f"case{i}" for i in range(len(DATA_OF_DC56C57))])
def test_the_data_are_those_of_the_array_generator_bit_for_bit(fields: dict, digest: str,
                                                               hits: int, device: str) -> None:
    data = generate(Workload(**fields), device)
    assert (_digest(data), data.n_hits) == (digest, hits)


def test_the_keys_alone_are_those_of_a_whole_workload() -> None:
    w = Workload(n_keys=3 * 4096, multiplicity=3, n_lookups=100)
    np.testing.assert_array_equal(workloads.generate_keys(w)[0], generate(w).keys)


def test_a_key_space_says_where_misses_can_fall() -> None:
    space = workloads.key_space(np.array([5, 3, 4, 4], dtype=np.uint32), np)
    assert space.distinct.tolist() == [3, 4, 5] and space.bits == 32
    assert not space.has_gaps and space.room_outside
    ends = workloads.key_space(np.array([0, 2**32 - 1], dtype=np.uint32), np)
    assert ends.has_gaps and not ends.room_outside


def test_misses_move_where_the_keys_leave_room_unless_the_user_said_where() -> None:
    ends = workloads.key_space(np.array([0, 7, 2**32 - 1], dtype=np.uint32), np)
    w = Workload(n_keys=3, key_bits=32, n_lookups=10, hit_rate=0.5, out_of_range_share=0.4)
    fitted, note = workloads.fit_misses(w, ends, "the keys")
    assert fitted.out_of_range_share == 0.0
    assert note == ("the keys reach both ends of their domain, so the 5 misses fall into gaps "
                    "between them: workload.out_of_range_share 0 instead of 0.4")
    with pytest.raises(ConfigError, match=r"^workload.out_of_range_share 0.4 cannot be met: "
                       r"the keys reach both ends of their domain; only out_of_range_share 0 "
                       r"is possible$"):
        workloads.fit_misses(w, ends, "the keys", explicit={"out_of_range_share"})
    assert workloads.fit_misses(w.model_copy(update={"hit_rate": 1.0}), ends, "k") == (
        w.model_copy(update={"hit_rate": 1.0}), None)


#: Every kernel of the generator on the CPU and through cuda.jit under numba's CUDA simulator,
#: on the same inputs (each call its own arrays: the simulator copies numpy arrays to its
#: device, so the pipeline's in-place calls, which CuPy arrays allow, are left out).
SIMULATED = textwrap.dedent("""
    import numpy as np
    from indexzoo.tools import workload_kernels as k
    from indexzoo.tools import workloads as wl

    U = np.uint64
    w = wl.Workload(n_keys=300, n_lookups=400, hit_rate=0.7, out_of_range_share=0.3, lookup_zipf=0.9)
    keys, space = wl.generate_keys(w)
    sd = space.distinct
    order = wl._shuffle(np, sd, 42, 9)
    misses = wl._miss_args(np, space, 60, 60, 42)
    cdf = np.cumsum(np.arange(1, 301, dtype=np.float64) ** -0.9)
    cdf /= cdf[-1]
    ordered = wl._sorted_stream(np, 400, 42, 10)
    runs = [  # (kernel, n, arguments, positions of the outputs)
        (k.STREAM, 400, lambda: (np.empty(400, U), U(7)), [0]),
        (k.STREAM_UNIFORM01, 400, lambda: (np.empty(400), U(7)), [0]),
        (k.UNSHUFFLED_INDEX, 400, lambda: (np.empty(400, U), ordered, wl._base(42, 10)), [0]),
        (k.GATHER, 600, lambda: (np.empty(600, np.uint32), sd.astype(np.uint32),
                                 np.arange(600, dtype=U)[::-1].copy(), U(2)), [0]),
        (k.KEYS_PERMUTED, 300, lambda: (np.empty(300, U), *wl._permute_constants(56, 42),
                                        U(100), U(8)), [0]),
        (k.PLAN_LOOKUPS, 400, lambda: (np.zeros(400, U), np.empty(400, np.int32), ordered,
                                       wl._base(42, 10), True, np.int64(280), np.int64(300),
                                       wl._base(42, 5), cdf, True, *misses), [0, 1]),
        (k.GATHER_HITS, 400, lambda: (np.zeros(400, np.uint32), order,
                                      np.arange(-100, 300, dtype=np.int64)), [0]),
        (k.MISSES, 120, lambda: (np.zeros(130, U), np.int64(10), *misses), [0]),
        (k.RANGE_HITS, 50, lambda: (np.zeros(50, U), np.zeros(50, U), sd, U(7), U(290),
                                    np.int64(11)), [0, 1]),
    ]
    for kernel, n, make, outs in runs:
        a, b = make(), make()
        kernel("cpu", n, *a)
        kernel("cuda", n, *b, threads_per_block=32)
        for j in outs:
            assert np.array_equal(a[j], b[j]), kernel
    print("simulator agrees")
""")


def test_the_generator_kernels_agree_in_the_cuda_simulator() -> None:
    agrees_in_the_simulator(SIMULATED)
