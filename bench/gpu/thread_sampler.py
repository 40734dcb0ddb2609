"""Where each thread of a running warpfold spends its time, from /proc (no perf or strace on the
GPU machine): every few milliseconds each thread's state and current system call are sampled, and
its scheduler statistics (time on a core, time waiting for one) are read at the end.

python3 thread_sampler.py OUT.json -- warpfold ARGS...
"""
import collections, json, os, subprocess, sys, time

SYSCALLS = {0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 74: "fsync", 75: "fdatasync",
            202: "futex", 230: "clock_nanosleep", 35: "nanosleep", 232: "epoll_wait", 61: "wait4",
            23: "select", 270: "pselect6", 271: "ppoll", 16: "ioctl", 9: "mmap", 11: "munmap", 257: "openat",
            3: "close", 8: "lseek", 262: "newfstatat", 4: "stat", 5: "fstat", 72: "fcntl", 281: "epoll_pwait",
            228: "clock_gettime", 24: "sched_yield", 56: "clone", 435: "clone3", 59: "execve", 293: "pipe2"}

def main():
    out = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    log = open(out + ".out", "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    pid = proc.pid
    samples = collections.defaultdict(collections.Counter)
    names, sched = {}, {}
    while proc.poll() is None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            break
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            try:
                comm = open(f"{base}/comm").read().strip()
                state = open(f"{base}/stat").read().rsplit(")", 1)[1].split()[0]
                sc = open(f"{base}/syscall").read().split()
                run, wait, _ = open(f"{base}/schedstat").read().split()
            except (FileNotFoundError, ProcessLookupError, ValueError, PermissionError):
                continue
            key = f"{comm}/{tid}"
            names[key] = comm
            sched[key] = (int(run) / 1e9, int(wait) / 1e9)
            if sc[0] == "running":
                what = "running"
            else:
                n = int(sc[0]) if sc[0].lstrip("-").isdigit() else -1
                what = SYSCALLS.get(n, f"syscall {n}")
            samples[key][f"{state} {what}"] += 1
        time.sleep(0.002)
    log.seek(0)
    err = log.read()
    report = {}
    for key, counts in samples.items():
        total = sum(counts.values())
        run, wait = sched.get(key, (0, 0))
        report[key] = {"samples": total, "on_core_s": round(run, 3), "waiting_for_a_core_s": round(wait, 3),
                       "states": {k: round(v / total, 3) for k, v in counts.most_common(6)}}
    json.dump({"command": cmd, "threads": report, "stderr_tail": err[-2000:]}, open(out, "w"), indent=1)
    # the busiest threads by name, and every named one
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0, collections.Counter()])
    for key, r in report.items():
        name = names[key]
        a = agg[name]
        a[0] += 1; a[1] += r["on_core_s"]; a[2] += r["waiting_for_a_core_s"]
        for k, v in samples[key].items():
            a[3][k] += v
    for name, (n, run, wait, counts) in sorted(agg.items(), key=lambda x: -x[1][1])[:12]:
        total = sum(counts.values())
        top = ", ".join(f"{k} {v / total:.0%}" for k, v in counts.most_common(4))
        print(f"{name:22s} x{n:<3d} on a core {run:7.2f} s, waiting for one {wait:6.2f} s | {top}")

main()
