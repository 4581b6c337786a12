"""Run by test_no_hang.py in a fresh interpreter: one scenario that once made a process hang.

Usage: python hang_child.py exit KIND CTX      hold a pipeline of KIND (never stopped) in a child
                                              process started with CTX, let that child return;
                                              exits with the child's exit code
       python hang_child.py signal KIND SIG    block the consumer on KIND, send SIG (ALRM or INT)
                                              after 0.5 s; exits 0 if the handler's exception
                                              reached the consumer
       python hang_child.py kill KIND CTX      kill the worker process of KIND mid-item; exits 0
                                              if the consumer saw an error (not a hang)

KIND: threads (a plain pipeline), executor (a pipe(executor=ProcessPoolExecutor) stage), region
(a to(ProcessPoolExecutorConfig) region), subprocess (iterate_in_subprocess). A scenario that
hangs is cut by the test's time limit.
"""

import concurrent.futures
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

from spdl_rs.pipeline import PipelineBuilder, iterate_in_subprocess
from spdl_rs.pipeline.defs import MAIN_PROCESS, ProcessPoolExecutorConfig

# Keeps a pipeline alive past the scenario function, as a framework holding its data loader.
_HELD: dict[str, object] = {}


def double(x):
    return 2 * x


def stuck(x):
    # Long past the signal (0.5 s), short enough for the stop that follows, which lets a
    # running op finish its call, to end within the test's limit.
    time.sleep(3)
    return x


def numbers():
    return range(1000)


def stuck_numbers():
    yield 0
    time.sleep(60)
    yield 1


def report_pid(x):
    # The worker's pid goes out as the item, so that the parent can kill it mid-item.
    if x == 0:
        return os.getpid()
    time.sleep(60)
    return x


def pid_then_stuck():
    yield os.getpid()
    time.sleep(60)
    yield 1


def build(kind: str, ctx: str, op=double):
    if kind == "subprocess":
        fn = {double: numbers, stuck: stuck_numbers, report_pid: pid_then_stuck}[op]
        return iterate_in_subprocess(fn, mp_context=ctx)
    b = PipelineBuilder().add_source(range(1000), continuous=True)
    if kind == "threads":
        b = b.pipe(op, concurrency=2)
    elif kind == "executor":
        pool = concurrent.futures.ProcessPoolExecutor(2, mp_context=mp.get_context(ctx))
        b = b.pipe(op, executor=pool, concurrency=2)
    elif kind == "region":
        b = b.to(ProcessPoolExecutorConfig(max_workers=2, mp_context=ctx)).pipe(op, concurrency=2).to(MAIN_PROCESS)
    else:
        raise ValueError(kind)
    return b.add_sink(4).build(num_threads=2)


def hold(kind: str, ctx: str) -> None:
    p = _HELD["p"] = build(kind, ctx)
    for i, _ in enumerate(p):
        if i >= 10:
            break


def exit_case(kind: str, ctx: str) -> int:
    if kind == "executor":
        # The user's own ProcessPoolExecutor, which the pipeline does not own: Python itself
        # cannot end a multiprocessing child holding one (its exit joins the pool's workers
        # before the pool's exit hook runs), so this one is held by the interpreter's main
        # process, whose exit must not wait on the pipeline.
        hold(kind, ctx)
        return 0
    child = mp.get_context(ctx).Process(target=hold, args=(kind, ctx))
    child.start()
    child.join()
    return child.exitcode


class Alarm(Exception):
    pass


def signal_case(kind: str, sig: str) -> int:
    ctx = "forkserver"
    p = build(kind, ctx, op=stuck)
    if sig == "ALRM":

        def on_alarm(*_):
            raise Alarm

        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        expected: type[BaseException] = Alarm
    else:
        # A shell starts background jobs with SIGINT ignored, and Python then keeps it ignored:
        # restore Python's own handler so the case tests our wait, not how the gate was started.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        expected = KeyboardInterrupt
    try:
        it = iter(p)  # a subprocess worker may still be starting when the signal comes
        if kind == "subprocess":
            next(it)  # the first item comes at once; the second never does
        while True:
            next(it)
    except expected:
        return 0


def kill_case(kind: str, ctx: str) -> int:
    p = build(kind, ctx, op=report_pid)
    it = iter(p)
    pid = next(it)
    os.kill(pid, signal.SIGKILL)
    try:
        for _ in it:
            pass
    except Exception as e:  # noqa: BLE001 - any error, as long as one comes
        print(f"{type(e).__name__}: {e}"[:200], file=sys.stderr)
        return 0
    # A pipeline whose stage failed on every item ends (each failure counted) instead.
    return 0 if kind != "subprocess" else 1


if __name__ == "__main__":
    case, kind, arg = sys.argv[1:4]
    code = {"exit": exit_case, "signal": signal_case, "kill": kill_case}[case](kind, arg)
    sys.exit(code)
