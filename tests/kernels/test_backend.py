"""set_backend: process-wide on its own, local to one thread as a context manager."""

import threading

import chokepoint


def _in_thread(func):
    result, errors = [], []

    def run():
        try:
            result.append(func())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not errors, errors
    return result[0]


def test_with_blocks_of_overlapping_threads_keep_their_own_engine():
    # issue 13.13: the second thread's `with` switched the first thread's engine
    default = _in_thread(chokepoint.get_backend)
    barrier = threading.Barrier(2, timeout=30)
    seen, errors = {}, []

    def worker(name):
        try:
            with chokepoint.set_backend(name):
                barrier.wait()  # both threads are inside their blocks
                seen[name] = [chokepoint.get_backend(),
                              chokepoint.relu(chokepoint.relu(1.0))]  # kernels run too
                barrier.wait()  # neither has left its block yet
                seen[name].append(chokepoint.get_backend())
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(n,)) for n in chokepoint.BACKENDS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert seen == {n: [n, 1.0, n] for n in chokepoint.BACKENDS}
    assert _in_thread(chokepoint.get_backend) == default


def test_with_block_leaves_other_threads_on_the_default():
    default = _in_thread(chokepoint.get_backend)
    other = next(n for n in chokepoint.BACKENDS if n != default)
    inside, done = threading.Event(), threading.Event()

    def block():
        with chokepoint.set_backend(other):
            inside.set()
            done.wait(30)
            return chokepoint.get_backend()

    thread_result = []
    t = threading.Thread(target=lambda: thread_result.append(block()))
    t.start()
    assert inside.wait(30)
    assert _in_thread(chokepoint.get_backend) == default
    done.set()
    t.join(30)
    assert thread_result == [other]


def test_plain_call_sets_the_process_default():
    before = _in_thread(chokepoint.get_backend)
    other = next(n for n in chokepoint.BACKENDS if n != before)
    try:
        chokepoint.set_backend(other)
        assert _in_thread(chokepoint.get_backend) == other
    finally:
        chokepoint.set_backend(before)
    assert _in_thread(chokepoint.get_backend) == before


def test_interleaved_enters_restore_the_default():
    # thread A's set_backend(...), thread B's, then A's __enter__, then B's
    default = _in_thread(chokepoint.get_backend)
    a, b = chokepoint.set_backend("numpy"), chokepoint.set_backend("numba")
    a.__enter__()
    assert _in_thread(chokepoint.get_backend) == "numba"
    b.__enter__()
    assert _in_thread(chokepoint.get_backend) == default
    b.__exit__(None, None, None)
    assert chokepoint.get_backend() == "numpy"
    a.__exit__(None, None, None)


def test_nested_blocks_restore_in_order():
    with chokepoint.set_backend("numpy"):
        with chokepoint.set_backend("numba"):
            assert chokepoint.get_backend() == "numba"
        assert chokepoint.get_backend() == "numpy"
        with chokepoint.set_backend("numpy") as again, again:
            assert chokepoint.get_backend() == "numpy"
        assert chokepoint.get_backend() == "numpy"
