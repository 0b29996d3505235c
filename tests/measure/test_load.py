"""The machine's load during a measurement: parsing, arithmetic and a real neighbour."""

import subprocess
import sys
import time

import pytest

from chokepoint.measure.load import Load, cpu_times, load_between, watch
from chokepoint.report.words import busy_machine

STAT = """cpu  590961 30 101175 733780 2194 0 400 1689 0 0
cpu0 220791 24 34123 458360 347 0 118 821 0 0
cpu1 370169 6 67052 275420 1846 0 282 868 0 0
intr 3132565 0 0
"""


def test_cpu_times_reads_busy_and_steal_of_the_given_cpus():
    busy, steal = cpu_times([1], STAT)
    tick = 100  # SC_CLK_TCK on Linux
    assert busy == pytest.approx((370169 + 6 + 67052 + 0 + 282) / tick)
    assert steal == pytest.approx(868 / tick)
    both = cpu_times([0, 1], STAT)
    assert both[0] > busy and both[1] > steal
    assert cpu_times([7], STAT) is None  # not there: not measured


def test_load_is_what_the_cpus_did_beyond_this_process():
    # 2 s: this process used 1.0 s, the CPUs 3.0 s busy and 0.4 s stolen
    load = load_between((0.0, 10.0, 100.0, 5.0), (2.0, 11.0, 103.0, 5.4), cpus=2)
    assert load == Load(seconds=2.0, cpus=2, own=0.5, others=1.0, steal=pytest.approx(0.2))
    assert load.busy and load.to_dict()["busy"] is True
    quiet = load_between((0.0, 10.0, 100.0, 5.0), (2.0, 11.0, 101.02, 5.0), cpus=2)
    assert quiet.others == pytest.approx(0.01) and not quiet.busy
    # ticks round apart from os.times: never negative
    assert load_between((0, 10.0, 100.0, 5.0), (1, 11.0, 100.9, 5.0), 2).others == 0.0
    # too short to tell a quarter of a core from a tick
    assert not load_between((0, 0, 0, 0), (0.05, 0, 0.05, 0), 2).busy
    assert load_between((0, 0, None, None), (1, 1, None, None), 2) is None


def test_the_words_say_a_busy_machine_and_nothing_on_a_quiet_one():
    busy = Load(seconds=3.0, cpus=2, own=1.0, others=0.98, steal=0.0)
    said = busy_machine(busy)
    assert "busy during the race" in said and "0.98 of its 2 cores" in said
    assert "steal" not in said and "quiet machine" in said
    assert "0.30 (steal time)" in busy_machine(Load(3.0, 2, 1.0, 0.1, 0.3))
    assert busy_machine(Load(3.0, 2, 1.0, 0.05, 0.0)) == ""
    assert busy_machine(None) == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_a_cpu_bound_neighbour_is_seen():
    # the neighbour is not waited for before the watch ends, so its CPU time is not ours
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # started
        with watch() as w:
            time.sleep(1.0)
    finally:
        neighbour.kill()
        neighbour.wait()
    assert w.load is not None and w.load.busy, w.load
    assert w.load.others >= 0.5 and w.load.own < 0.2
