"""What bench/send_throughput.py and bench/overload.py share: issue 12's
overload recording (its flags and cache), and a loopback port chosen at run time."""
import os
import socket
import subprocess

# runlens synth flags of the recording (1024 ranks x 500 steps, GPU samples every step, 1.09 M events).
SYNTH_FLAGS = ["--ranks", "1024", "--steps", "500", "--gpu-every", "1",
               "--fault", "straggler:rank=713,from=250", "--fault", "nan:step=480"]


def synth(binary, path):
    """Makes the recording at `path` unless it is there already (it is cached between runs)."""
    if os.path.exists(path):
        return
    subprocess.run([binary, "synth", *SYNTH_FLAGS, "--out", path], check=True, stderr=subprocess.DEVNULL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_arguments(ap):
    """The flags of a benchmark that sends the recording: --binary, --dir (the cache), --repeat, --rates."""
    ap.add_argument("--binary", default=os.path.join(os.environ.get("RUNLENS_BUILD_DIR", "build"), "runlens"))
    ap.add_argument("--dir", default="/tmp/runlens-send-bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rates", nargs="*", default=["1M", "2M"], help="paced modes besides the burst")


def recording(args):
    """The recording's path in --dir, made first when it is not cached there."""
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "overload-1024x500.rlrec")
    synth(args.binary, path)
    return path
