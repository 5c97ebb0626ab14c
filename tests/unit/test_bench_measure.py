"""The benchmarks' measuring (tests/bench/measure.py): an untrustworthy sample fails, the
quick tripwire and the full target are what docs/performance.md says."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from appgen import write_app  # noqa: E402
from measure import BenchmarkError, Figure, peak_rss_bytes  # noqa: E402


@pytest.mark.parametrize("subject, floor", [([], []), ([1.0], []), ([math.nan], [1.0]), ([1.0], [math.nan]),
                                            ([1.0], [0.0]), ([math.inf], [1.0])])
def test_untrustworthy_samples_fail(subject, floor):
    with pytest.raises(BenchmarkError):
        Figure("f", 1.15, subject, floor)


def test_ratio_is_the_median_of_paired_ratios():
    f = Figure("f", 1.15, [1.2, 3.0, 1.1], [1.0, 1.0, 1.0])
    assert f.ratio == pytest.approx(1.2) and f.spread == (1.1, 3.0)
    assert not f.ok(quick=False) and f.ok(quick=True)  # 1.2 <= 1.15 * 1.5


def test_quick_tripwire_catches_a_doubling():
    assert not Figure("f", 1.15, [2.4], [1.0]).ok(quick=True)


def test_a_figure_short_of_its_target_trips_on_regression_from_today():
    f = Figure("rss", 4.0, [14.0], [1.0], today=14.2)
    assert f.ok(quick=True) and not f.ok(quick=False)
    assert not Figure("rss", 4.0, [30.0], [1.0], today=14.2).ok(quick=True)


def test_peak_rss_is_the_child_s_own(tmp_path: Path):
    app = write_app(tmp_path / "app", clusters=1, others=0)
    ballast = bytearray(200 * 1024 * 1024)  # a big parent must not leak into the child's figure
    ballast[::4096] = b"x" * len(ballast[::4096])
    rss = peak_rss_bytes("render", str(app))
    assert 5 * 1024 * 1024 < rss < 150 * 1024 * 1024
    del ballast
