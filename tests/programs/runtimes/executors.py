"""A python3 program for the runtimes corpus: thread and process pools (fork and spawn),
a multiprocessing queue, a signal delivered to a thread, and a chosen exit status."""
import concurrent.futures as cf
import hashlib
import multiprocessing as mp
import os
import signal
import sys
import threading


def work(i: int) -> str:
    h = str(i).encode()
    for _ in range(20000):
        h = hashlib.sha256(h).digest()
    return h.hex()[:8]


def producer(q) -> None:
    for i in range(50):
        q.put(i * i)
    q.put(None)


if __name__ == "__main__":
    with cf.ThreadPoolExecutor(4) as ex:
        print("threads", list(ex.map(work, range(8))))
    for method in ("fork", "spawn"):
        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context(method)) as ex:
            print(method, list(ex.map(work, range(4))))
    q = mp.Queue()
    p = mp.Process(target=producer, args=(q,))
    p.start()
    total = 0
    while (x := q.get()) is not None:
        total += x
    p.join()
    print("queue", total, p.exitcode)
    got = threading.Event()
    signal.signal(signal.SIGUSR1, lambda s, f: got.set())
    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
    print("signal", got.wait(10))
    sys.stdout.flush()
    os._exit(6)
