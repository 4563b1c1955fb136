#!/usr/bin/env python3
"""What TLS and basic auth cost a scrape of /metrics, in one run: two `proofline watch`
(release build) of the same generated log, one plain, one behind a web config (TLS, a client
certificate required, basic auth with a bcrypt hash of cost 10), scraped from loopback in
interleaved rounds. Prints p50/p90 per kind and the ratio to plain HTTP.

Usage: scripts/bench-tls.py [ROUNDS]   (needs openssl; builds proofline --release)
"""
import base64
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # glibc's bcrypt ($2b$), for the hash; deprecated in 3.11, present
import http.client
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "proofline-cli"],
               cwd=root, check=True)
exe = os.path.join(root, "target/release/proofline")
work = tempfile.mkdtemp(prefix="proofline-bench-tls-")


def sh(*args):
    subprocess.run(args, cwd=work, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ec_key(name):
    sh("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name)


# a private CA, a server certificate for localhost, a client certificate
ec_key("ca.key")
sh("openssl", "req", "-x509", "-key", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=bench CA",
   "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
for name, ext in [("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                  ("client", "extendedKeyUsage=clientAuth\n")]:
    ec_key(f"{name}.key")
    sh("openssl", "req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    with open(os.path.join(work, f"{name}.ext"), "w") as f:
        f.write(ext)
    sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
password = "bench-s3cret"
bcrypt_hash = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
with open(os.path.join(work, "web.yml"), "w") as f:
    f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
            f"basic_auth_users:\n  bench: '{bcrypt_hash}'\n")
log = os.path.join(work, "cuzk.log")
subprocess.run([exe, "generate", "--jobs", "200", "--gpus", "8", "-o", log], check=True)


def watch(web):
    args = [exe, "watch", "--from-start", "--metrics-addr", "127.0.0.1:0"]
    if web:
        args += ["--web.config.file", os.path.join(work, "web.yml")]
    p = subprocess.Popen(args + [log], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"metrics on https?://127\.0\.0\.1:(\d+)/metrics", line)
        if m:
            return p, int(m.group(1))
    raise SystemExit("watch did not start")


plain, plain_port = watch(False)
secure, secure_port = watch(True)
time.sleep(2)  # both have read the log
ctx = ssl.create_default_context(cafile=os.path.join(work, "ca.crt"))
ctx.load_cert_chain(os.path.join(work, "client.crt"), os.path.join(work, "client.key"))
good = {"Authorization": "Basic " + base64.b64encode(f"bench:{password}".encode()).decode()}
bad = {"Authorization": "Basic " + base64.b64encode(b"bench:guess").decode()}


def timed(conn, headers, want):
    t = time.perf_counter()
    conn.request("GET", "/metrics", headers=headers)
    r = conn.getresponse()
    r.read()
    assert r.status == want, r.status
    return time.perf_counter() - t


samples = {k: [] for k in ["plain, kept-alive", "TLS + auth, kept-alive (password remembered)",
                           "TLS + auth, new connection each", "wrong password (bcrypt each time)"]}
for _ in range(ROUNDS):
    c = http.client.HTTPConnection("127.0.0.1", plain_port, timeout=10)
    samples["plain, kept-alive"] += [timed(c, {}, 200) for _ in range(100)]
    c.close()
    c = http.client.HTTPSConnection("localhost", secure_port, context=ctx, timeout=10)
    samples["TLS + auth, kept-alive (password remembered)"] += [timed(c, good, 200) for _ in range(100)]
    c.close()
    for _ in range(30):
        c = http.client.HTTPSConnection("localhost", secure_port, context=ctx, timeout=10)
        t = time.perf_counter()
        c.request("GET", "/metrics", headers=good)
        r = c.getresponse()
        r.read()
        assert r.status == 200
        samples["TLS + auth, new connection each"].append(time.perf_counter() - t)
        c.close()
    c = http.client.HTTPSConnection("localhost", secure_port, context=ctx, timeout=10)
    samples["wrong password (bcrypt each time)"] += [timed(c, bad, 401) for _ in range(10)]
    c.close()
plain.kill()
secure.kill()

base = statistics.median(samples["plain, kept-alive"])
print(f"{'scrape of /metrics (200-sector log, 8 GPUs)':48} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'x plain':>8}")
for k, v in samples.items():
    v = sorted(v)
    p50, p90 = statistics.median(v), v[int(0.9 * (len(v) - 1))]
    print(f"{k:48} {len(v):5} {p50 * 1e3:8.2f} {p90 * 1e3:8.2f} {p50 / base:8.1f}")
