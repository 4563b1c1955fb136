#!/usr/bin/env python3
"""A bounded scrape load on loopback: GET URL at RATE requests/s for SECONDS, one keep-alive
connection per worker thread. Prints requests, errors and latency percentiles."""
import http.client
import sys
import threading
import time
from urllib.parse import urlparse

url, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
u = urlparse(url)
assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
workers = 4
lat, errors, lock = [], [0], threading.Lock()
stop_at = time.monotonic() + seconds


def worker(offset):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    interval = workers / rate
    nxt = time.monotonic() + offset * interval / workers
    while True:
        now = time.monotonic()
        if now >= stop_at:
            return
        if nxt > now:
            time.sleep(nxt - now)
        nxt += interval
        t0 = time.monotonic()
        try:
            conn.request("GET", u.path)
            r = conn.getresponse()
            body = r.read()
            ok = r.status == 200 and b"proofline_gpu_busy_seconds" in body
        except Exception:
            ok = False
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
        with lock:
            if ok:
                lat.append(time.monotonic() - t0)
            else:
                errors[0] += 1


threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
lat.sort()
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")
print(f"scrapes {len(lat)} ok, {errors[0]} errors in {seconds:.0f} s ({len(lat) / seconds:.0f}/s); "
      f"latency p50 {pct(0.5):.2f} ms, p99 {pct(0.99):.2f} ms, max {pct(1.0):.2f} ms")
