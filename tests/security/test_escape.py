"""Escape and abuse suite: hostile programs through the real bubblewrap sandbox.

Each attack asserts its verdict, and the ``run_attack`` harness (conftest.py)
asserts the host was not harmed: canary files intact, no file written outside
the sandbox, no process left, no listener reached, a host sentinel alive, the
runner unchanged. Two designs of attack:

- *cheat*: the expected output is what a successful attack would print (a
  hidden answer, a secret); the verdict must be failing;
- *probe*: the program tries many doors and prints the ones that opened; the
  expected output is the empty list, so the test passes only if all stayed shut.
"""
from __future__ import annotations

import asyncio

import pytest

from cobalt.execution.base import ExecOptions, TestCases

from escape_harness import SUITE_LIMITS, Attack, check_verdict, shown_outputs, wait_no_leftovers

RE = ("runtime_error",)
WA = ("wrong_answer",)
OK = ("passed",)
TO = ("timeout",)
FAILING = frozenset({"runtime_error", "wrong_answer", "memory_limit", "timeout", "output_limit", "sandbox_error"})

# --- reading host files ----------------------------------------------------------------
READ = [
    Attack("read_canary_secret", "print(open('@@SECRET_FILE@@').read())", ("@@SECRET@@",), status=RE),
    Attack(
        "read_dataset_hidden_tests",
        "import os\nprint(os.path.getsize('@@DATASET@@'))",
        ("@@DATASET_SIZE@@",),
        status=RE,
    ),
    Attack(
        "probe_host_trees",
        "import os\nprint([p for p in ['/work', '@@REPO@@', '@@CANARY_DIR@@', '/home', '/etc', '/var', '/srv',"
        " '/mnt', '/opt', '/sys', '/run', '/dev/shm', '/boot'] if os.path.exists(p)])",
        ("[]",),
        status=OK,
    ),
    Attack(
        "probe_etc_files",
        "seen = []\nfor p in ('/etc/shadow', '/etc/passwd', '/etc/hostname', '/etc/resolv.conf', '/etc/ssh'):\n"
        "    try:\n        open(p).read(1)\n        seen.append(p)\n    except OSError:\n        pass\nprint(seen)",
        ("[]",),
        status=OK,
    ),
    Attack(
        "probe_home_beyond_interpreter",
        # Only the interpreter's own prefix may show under /root (or wherever it lives).
        "import os\nparts = '@@PREFIX@@'.strip('/').split('/')\nextra = []\n"
        "for k in range(len(parts)):\n    d = '/' + '/'.join(parts[:k])\n"
        "    if k == 0:\n        continue\n"
        "    extra += [os.path.join(d, n) for n in os.listdir(d) if n != parts[k]]\n"
        "host = @@ROOT_NAMES@@\ntry:\n    extra += [n for n in os.listdir('/root') if n in host and n != parts[1]]\n"
        "except OSError:\n    pass\nprint(sorted(set(extra)))",
        ("[]",),
        status=OK,
    ),
    Attack(
        "probe_proc_of_other_processes",
        "import os\nhits = []\nfor pid in os.listdir('/proc'):\n    if not pid.isdigit():\n        continue\n"
        "    for f in ('cmdline', 'environ'):\n        try:\n            data = open(f'/proc/{pid}/{f}', 'rb').read()\n"
        "        except OSError:\n            continue\n"
        "        for needle in (b'pytest', b'@@ENV_NAME@@', b'@@ENV_SECRET@@', b'process_api'):\n"
        "            if needle in data:\n                hits.append((pid, f, needle.decode()))\n"
        "for pid in ('@@HOST_PID@@', '@@SENTINEL_PID@@'):\n    if os.path.exists(f'/proc/{pid}/status'):\n"
        "        hits.append((pid, 'status', 'host pid visible'))\nprint(hits)",
        ("[]",),
        status=OK,
        note="bwrap's own argv (pid 1) is readable and names host paths of the runner and interpreter",
    ),
    Attack(
        "read_proc1_environ",
        "print(open('/proc/1/environ').read())",
        ("@@ENV_SECRET@@",),
        status=RE,
        note="pid 1 is the sandbox's bwrap (root-owned); never the host's init",
    ),
    Attack("env_secret_cheat", "import os\nprint(os.environ.get('@@ENV_NAME@@', 'absent'))", ("@@ENV_SECRET@@",), status=WA),
    Attack(
        "probe_environment_is_minimal",
        "import os\nprint(sorted(k for k in os.environ if k not in ('PATH', 'LANG', 'LC_ALL', 'HOME', 'TMPDIR',"
        " 'PYTHONIOENCODING', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED', 'OMP_NUM_THREADS',"
        " 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'PWD')))",
        ("[]",),
        status=OK,
    ),
    Attack(
        "import_the_judge",
        "try:\n    import cobalt.execution.compare\n    print('judge importable')\nexcept ImportError:\n    print('absent')",
        ("absent",),
        status=OK,
    ),
]

# --- writing, deleting, filling ----------------------------------------------------------
WRITE = [
    Attack("write_into_host_tmp_dir", "open('@@CANARY_DIR@@/pwn-@@TOKEN@@', 'w').write('x')\nprint('wrote')", ("wrote",), status=RE),
    Attack("delete_host_canary", "import os\nos.remove('@@VICTIM_FILE@@')\nprint('deleted')", ("deleted",), status=RE),
    Attack(
        "probe_write_everywhere",
        "import os\nok = []\nfor d in ('/', '/usr', '/usr/lib', '/usr/bin', '/dev', '/proc', '/cobalt', '/root', '@@PREFIX@@',"
        " '@@PREFIX@@/bin', '@@PREFIX@@/lib', '@@REPO@@', '/var/tmp', '/dev/shm'):\n"
        "    try:\n        with open(os.path.join(d, 'pwn-@@TOKEN@@'), 'w') as f:\n            f.write('x')\n"
        "        ok.append(d)\n    except OSError:\n        pass\nprint(ok)",
        ("[]",),
        status=OK,
    ),
    Attack(
        "probe_tamper_runner_file",
        "import os\nok = []\nops = {\n 'append': lambda: open('/cobalt/runner.py', 'a').write('#'),\n"
        " 'unlink': lambda: os.unlink('/cobalt/runner.py'),\n 'rename': lambda: os.rename('/cobalt/runner.py', '/cobalt/x'),\n"
        " 'chmod': lambda: os.chmod('/cobalt/runner.py', 0o777),\n 'chmod_tmp': lambda: os.chmod('/tmp', 0o700),\n"
        " 'stdlib': lambda: open(os.__file__, 'a').write('#'),\n}\nfor name, op in ops.items():\n"
        "    try:\n        op()\n        ok.append(name)\n    except OSError:\n        pass\nprint(ok)",
        ("[]",),
        status=OK,
    ),
    Attack(
        "private_tmp_is_usable",
        "p = '/tmp/pwn-@@TOKEN@@'\nopen(p, 'w').write('hello')\nprint(open(p).read())",
        ("hello",),
        status=OK,
        note="the sandbox's own /tmp works; the host's /tmp never sees the file",
    ),
    Attack(
        "file_size_limit",
        "with open('/tmp/big', 'wb') as f:\n    f.write(b'x' * (4 << 20))\nprint('wrote')",
        ("wrote",),
        status=RE,
    ),
    Attack(
        "probe_device_nodes",
        "import os\nok = []\nfor p in ('/dev/mem', '/dev/kmsg', '/dev/sda', '/dev/vda', '/dev/tty', '/dev/console', '/dev/kvm'):\n"
        "    try:\n        open(p, 'rb').close()\n        ok.append(p)\n    except OSError:\n        pass\n"
        "try:\n    os.mknod('/tmp/nod', 0o600 | 0o060000, os.makedev(8, 0))\n    ok.append('mknod')\nexcept OSError:\n    pass\n"
        "print(ok)",
        ("[]",),
        status=OK,
    ),
]

# --- network -----------------------------------------------------------------------------
NETWORK = [
    Attack(
        "tcp_to_host_listener",
        "import socket\nsocket.create_connection(('127.0.0.1', @@TCP_PORT@@), timeout=0.5)\nprint('connected')",
        ("connected",),
        status=RE,
    ),
    Attack(
        "udp_to_host_listener",
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for _ in range(5):\n    s.sendto(b'@@TOKEN@@', ('127.0.0.1', @@UDP_PORT@@))\ntime.sleep(0.1)\nprint('sent')",
        ("sent",),
        status=RE,
        note="IPv4 and IPv6 sockets are refused by the seccomp filter (the sandbox has no network anyway); the "
        "host's listener must still see nothing",
    ),
    Attack("dns_lookup", "import socket\nprint(socket.getaddrinfo('example.com', 80)[0][4][0])", ("93.184.215.14",), status=RE),
    Attack(
        "tcp_to_internet",
        "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=0.5)\nprint('connected')",
        ("connected",),
        status=RE,
    ),
    Attack(
        "unix_socket_on_host_path",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('@@UNIX_PATH@@')\nprint('connected')",
        ("connected",),
        status=RE,
    ),
    Attack(
        "abstract_unix_socket",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0@@ABSTRACT@@')\nprint('connected')",
        ("connected",),
        status=RE,
    ),
    Attack(
        "probe_interfaces_and_raw_sockets",
        "import socket\nnames = [n for _, n in socket.if_nameindex()]\nok = []\n"
        "for fam, typ in ((socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW), (socket.AF_NETLINK, socket.SOCK_RAW)):\n"
        "    try:\n        socket.socket(fam, typ, 0 if fam != socket.AF_INET else socket.IPPROTO_ICMP)\n        ok.append(int(fam))\n"
        "    except OSError:\n        pass\nprint(names, [f for f in ok if f != socket.AF_NETLINK])",
        ("['lo'] []",),
        status=OK,
    ),
]

# --- process creation ----------------------------------------------------------------------
PROCESSES = [
    Attack(
        "os_fork_is_contained",
        "import os\npid = os.fork()\nif pid == 0:\n    print('child', flush=True)\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('parent')",
        ("child\nparent",),
        status=OK,
    ),
    Attack(
        "os_system_shell_reads_and_writes",
        "import os\nos.system('cat @@SECRET_FILE@@ 2>/dev/null; touch @@CANARY_DIR@@/pwn-@@TOKEN@@ 2>/dev/null; echo done')",
        ("@@SECRET@@\ndone",),
        status=WA,
    ),
    Attack(
        "posix_spawn_background_sleeper",
        "import os\nos.posix_spawn('/bin/sleep', ['sleep', '1000'], {})\nprint('spawned')",
        ("spawned",),
        status=OK,
        note="the sleeper outlives the program and is killed with the test",
    ),
    Attack(
        "posixsubprocess_as_root",
        "import subprocess\nprint(subprocess.run(['id', '-u'], user=0, capture_output=True, text=True).stdout)",
        ("0",),
        status=RE,
    ),
    Attack(
        "subprocess_cat_secret",
        "import subprocess\nprint(subprocess.run(['cat', '@@SECRET_FILE@@'], capture_output=True, text=True).stdout)",
        ("@@SECRET@@",),
        status=WA,
    ),
    Attack(
        "ctypes_libc_fork",
        "import ctypes, os\nlibc = ctypes.CDLL(None)\npid = libc.fork()\nif pid == 0:\n    os.write(1, b'c')\n"
        "    libc._exit(0)\nos.waitpid(pid, 0)\nprint('p')",
        ("cp",),
        status=OK,
    ),
    Attack(
        "multiprocessing_pool",
        "import multiprocessing as mp\nwith mp.Pool(2) as p:\n    print(sum(p.map(abs, [-1, -2, -3])))",
        ("6",),
        status=RE,
        note="no /dev/shm in the sandbox, so POSIX semaphores (and Pool) are unavailable",
    ),
    Attack(
        "multiprocessing_fork_process",
        "import multiprocessing as mp, time\ndef spin():\n    while True:\n        time.sleep(0.01)\n"
        "p = mp.get_context('fork').Process(target=spin)\np.start()\nprint('started')",
        ("started",),
        status=OK,
    ),
    Attack(
        "fork_bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        status=TO,
    ),
    Attack(
        "zombie_children",
        "import os\nfor _ in range(10):\n    if os.fork() == 0:\n        os._exit(0)\nprint('done')",
        ("done",),
        status=OK,
    ),
    Attack(
        "double_fork_setsid_daemon",
        "import os, signal, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n            signal.signal(s, signal.SIG_IGN)\n"
        "        while True:\n            time.sleep(0.01)\n    os._exit(0)\ntime.sleep(0.1)\nprint('escaped?')",
        ("escaped?",),
        status=OK,
        note="the harness checks that no process of the sandbox's uid is left",
    ),
]

# --- memory, stack, output, stdin ------------------------------------------------------------
RESOURCES = [
    Attack("heap_bomb_one_shot", "x = bytearray(1 << 31)", status=("memory_limit",)),
    Attack("heap_bomb_growing", "xs = []\nwhile True:\n    xs.append(' ' * 10 ** 6)", status=("memory_limit",)),
    Attack("mmap_bomb", "import mmap\nm = mmap.mmap(-1, 1 << 33)\nm[-1] = 1\nprint('mapped')", ("mapped",),
           status=frozenset({"runtime_error", "memory_limit"})),
    Attack(
        "ctypes_malloc_bomb",
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.malloc.restype = ctypes.c_void_p\nn = 0\n"
        "while libc.malloc(64 << 20):\n    n += 1\nprint(n * 64 < 256)",
        ("True",),
        status=OK,
        note="malloc returns NULL at the address-space limit",
    ),
    # A million-frame traceback takes the child longer to format than the wall limit
    # allows, so these end as timeouts as often as errors: failing either way.
    Attack("stack_recursion", "def f(n):\n    return f(n + 1) + 1\nf(0)",
           status=frozenset({"runtime_error", "memory_limit", "timeout"})),
    Attack(
        "c_stack_recursion_segfault",
        "import sys\nsys.setrecursionlimit(10 ** 8)\nx = []\nfor _ in range(10 ** 7):\n    x = [x]\nprint(repr(x)[:5])",
        status=frozenset({"runtime_error", "memory_limit", "timeout"}),
    ),
    Attack("exponential_recursion", "def f(n):\n    return f(n - 1) + f(n - 1) if n else 1\nprint(f(200))", status=TO),
    Attack("deep_nesting_parser", "print(eval('(' * 10 ** 6 + ')' * 10 ** 6))", status=RE),
    Attack("stdout_flood_lines", "while True:\n    print('y' * 1000)", status=("output_limit",)),
    Attack("stdout_one_huge_write", "import sys\nsys.stdout.write('x' * 10 ** 7)", status=("output_limit",)),
    Attack("stderr_flood", "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)", status=TO),
    Attack(
        "grandchild_floods_after_exit",
        "import os\nif os.fork() == 0:\n    while True:\n        os.write(1, b'y' * 65536)\nprint('answer')",
        ("answer",),
        status=frozenset({"output_limit", "wrong_answer"}),
    ),
    Attack("read_past_stdin", "print(input())\nprint(input())", ("only\nmore",), inputs=("only\n",), status=RE),
    Attack(
        "close_stdin_and_open_tty",
        "import os\nos.close(0)\nfd = os.open('/dev/tty', os.O_RDONLY)\nprint(os.read(fd, 10))",
        ("x",),
        status=RE,
    ),
    Attack(
        "stdin_tamper_is_per_test",
        "import os\nline = input()\ntry:\n    os.pwrite(0, b'HACKED' * 10, 0)\nexcept OSError:\n    pass\nprint(line)",
        ("first", "second", "third"),
        inputs=("first\n", "second\n", "third\n"),
        status=("passed",) * 3,
    ),
]

# --- signals, ptrace, limits, privileges ----------------------------------------------------------
SIGNALS = [
    Attack(
        "kill_parent_runner",
        "import os\nos.kill(os.getppid(), 9)\nprint('a')",
        ("a", "a", "a"),
        status=frozenset({"sandbox_error", "runtime_error"}),
        note="as root the tests' uid is not the runner's, so the kill is refused (runtime_error); in a user "
        "namespace, killing its own runner only fails the program",
    ),
    Attack("kill_minus_one", "import os\nos.kill(-1, 9)", ("",) * 3,
           status=frozenset({"sandbox_error", "runtime_error", "passed"}),
           note="as root, kill(-1) reaches only the test uid's processes inside this sandbox's PID namespace "
           "(itself spared): the test lives on and its empty output is judged, unless a sibling test of the same "
           "program, running at the same time, killed it first (runtime_error: the program harms only itself); "
           "in a user namespace it takes the runner down"),
    Attack(
        "killpg_everything",
        "import os\nfor g in range(1, 300):\n    try:\n        os.killpg(g, 9)\n    except OSError:\n        pass\nprint('x')",
        ("x",) * 2,
        status=frozenset({"sandbox_error", "runtime_error"}),
    ),
    Attack(
        "kill_sandbox_init",
        "import os, time\ntry:\n    os.kill(1, 9)\nexcept OSError:\n    pass\ntime.sleep(0.1)\nprint(os.path.exists('/proc/1'))",
        ("True",),
        status=OK,
    ),
    Attack(
        "signal_host_pids",
        "import os\nmissed = 0\nfor pid in (@@HOST_PID@@, @@SENTINEL_PID@@):\n    try:\n        os.kill(pid, 9)\n"
        "    except ProcessLookupError:\n        missed += 1\nprint(missed)",
        ("2",),
        status=OK,
    ),
    Attack(
        "sigstop_the_runner",
        "import os, time\nos.kill(os.getppid(), 19)\ntime.sleep(100)",
        ("",) * 2,
        status=frozenset({"timeout", "runtime_error"}),
        limits={"program_wall_s": 2.0},
        note="as root the stop is refused (runtime_error); in a user namespace the host's own deadline (program "
        "cap + grace) ends it (timeout); attacks run under cobalt: one entry per test",
    ),
    Attack(
        "probe_ptrace_and_proc_of_runner",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nppid = os.getppid()\nok = []\n"
        "if libc.ptrace(16, ppid, 0, 0) != -1:\n    ok.append('attach')\n"
        "if libc.ptrace(0x4206, ppid, 0, 0) != -1:\n    ok.append('seize')\n"
        "for f in ('mem', 'environ', 'maps', 'fd', 'stack', 'syscall'):\n    try:\n        p = f'/proc/{ppid}/{f}'\n"
        "        os.listdir(p) if f == 'fd' else open(p, 'rb').read(1)\n        ok.append(f)\n    except OSError:\n        pass\n"
        "class IOV(ctypes.Structure):\n    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(16)\nlocal, remote = IOV(ctypes.addressof(buf), 16), IOV(0x400000, 16)\n"
        "if libc.process_vm_readv(ppid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != -1:\n    ok.append('vm_readv')\n"
        "print(ok)",
        ("[]",),
        status=OK,
    ),
    Attack(
        "write_runner_result_pipe_via_proc",
        "import os, json\nrec = json.dumps({'i': 0, 'exit': 0, 'timeout': False, 'olimit': False, 'wall': 0.0, 'cpu': 0.0,"
        " 'stdout': '@@SECRET@@', 'stderr': ''}) + '\\n'\nfor pid in (os.getppid(), 1):\n    for n in range(64):\n"
        "        try:\n            with open(f'/proc/{pid}/fd/{n}', 'w') as f:\n                f.write(rec)\n"
        "        except OSError:\n            pass\nprint('wrong')",
        ("@@SECRET@@", "@@SECRET@@"),
        status=("wrong_answer",) * 2,
    ),
    Attack(
        "probe_raise_rlimits",
        "import resource, os\nok = []\nfor name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_CORE'):\n"
        "    r = getattr(resource, name)\n    for pid in (0, os.getpid()):\n        try:\n"
        "            resource.prlimit(pid, r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "            ok.append(name)\n        except (ValueError, OSError):\n            pass\nprint(ok)",
        ("[]",),
        status=OK,
    ),
    Attack(
        "lower_the_runners_limits",
        "import resource, os\nresource.prlimit(os.getppid(), resource.RLIMIT_AS, (1 << 20, 1 << 20))\nprint('ok')",
        ("ok", "ok"),
        status=frozenset({"passed", "runtime_error"}),
        note="a test may change its runner's limits (same uid): that only breaks the program's own later tests "
        "(tests that already run beside it are unaffected)",
    ),
    Attack(
        "probe_privileges",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nok = []\n"
        "for name, op in (('setuid0', lambda: os.setuid(0)), ('setgid0', lambda: os.setgid(0)),"
        " ('chroot', lambda: os.chroot('/tmp'))):\n    try:\n        op()\n        ok.append(name)\n    except OSError:\n        pass\n"
        "if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n    ok.append('mount')\n"
        "status = open('/proc/self/status').read()\ncaps = [l.split()[1] for l in status.splitlines() if l.startswith(('CapEff', 'CapPrm'))]\n"
        "print(ok, caps, os.getuid() != 0)",
        ("[] ['0000000000000000', '0000000000000000'] True",),
        status=OK,
    ),
    Attack(
        "user_namespace_unbounded_tmpfs",
        # With a user namespace of its own the program could mount a tmpfs without a size
        # limit and fill the host's memory; the sandbox's seccomp filter refuses it.
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.prctl(4, 1, 0, 0, 0)\n"
        "uid, gid = os.getuid(), os.getgid()\nif libc.unshare(0x10000000 | 0x00020000) != 0:\n"
        "    raise OSError(ctypes.get_errno(), 'unshare')\nopen('/proc/self/setgroups', 'w').write('deny')\n"
        "open('/proc/self/uid_map', 'w').write(f'0 {uid} 1')\nopen('/proc/self/gid_map', 'w').write(f'0 {gid} 1')\n"
        "os.mkdir('/tmp/big')\nassert libc.mount(b'none', b'/tmp/big', b'tmpfs', 0, None) == 0\n"
        "for i in range(12):\n    with open(f'/tmp/big/f{i}', 'wb') as f:\n        f.write(b'x' * (1 << 20))\n"
        "print('12 MiB past an 8 MiB tmpfs')",
        ("12 MiB past an 8 MiB tmpfs",),
        status=RE,
    ),
    Attack(
        "probe_namespace_syscalls",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nok = []\nNEWUSER = 0x10000000\n"
        "if libc.unshare(NEWUSER) == 0:\n    ok.append('unshare')\n"
        "pid = libc.syscall(@@NR_CLONE@@, NEWUSER | 17, 0, 0, 0, 0)  # raw clone(CLONE_NEWUSER | SIGCHLD)\n"
        "if pid == 0:\n    os._exit(0)\nif pid > 0:\n    ok.append('clone')\n    os.waitpid(pid, 0)\n"
        "args = (ctypes.c_uint64 * 11)(NEWUSER, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)\n"
        "pid = libc.syscall(435, args, 88)  # clone3\nif pid == 0:\n    os._exit(0)\nif pid > 0:\n    ok.append('clone3')\n"
        "for ns in ('user', 'net', 'mnt', 'pid'):\n    try:\n        fd = os.open(f'/proc/1/ns/{ns}', os.O_RDONLY)\n"
        "        if libc.setns(fd, 0) == 0:\n            ok.append('setns ' + ns)\n    except OSError:\n        pass\n"
        "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nprint(ok, 'plain fork works')",
        ("[] plain fork works",),
        status=OK,
    ),
    Attack(
        "ctypes_segfault",
        "import ctypes\nctypes.string_at(0)",
        status=RE,
    ),
    Attack("abort", "import os\nos.abort()", status=RE),
]

# --- timing ---------------------------------------------------------------------------------------
TIMING = [
    Attack("sleep_past_limit", "import time\ntime.sleep(100)", status=TO),
    Attack("busy_loop", "while True:\n    pass", status=TO),
    Attack(
        "monkeypatched_clocks",
        "import time\nfor name in ('time', 'monotonic', 'perf_counter', 'process_time'):\n    setattr(time, name, lambda: 0.0)\n"
        "while True:\n    pass",
        status=TO,
    ),
    Attack(
        "ignore_sigterm_and_sigxcpu",
        "import signal\nfor s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n    pass",
        status=TO,
    ),
    Attack(
        "sleepers_exhaust_the_program_budget",
        "import time\ntime.sleep(100)",
        ("",) * 5,
        status=("timeout",) * 5,
        limits={"program_wall_s": 2.5},
    ),
]

# --- threads ---------------------------------------------------------------------------------------
THREADS = [
    Attack(
        "eight_threads_fit_the_memory_limit",
        "import threading\nout = []\nts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n"
        "for t in ts:\n    t.start()\nfor t in ts:\n    t.join()\nprint(sum(out))",
        ("28",),
        status=OK,
        note="control: thread stacks are 8 MiB, not the main thread's raised stack limit",
    ),
    Attack(
        "thread_bomb",
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()",
        status=RE,
    ),
    Attack(
        "thread_outlives_main",
        "import threading, time\ndef loop():\n    while True:\n        time.sleep(0.01)\n"
        "threading.Thread(target=loop).start()\nprint('answer')",
        ("answer",),
        status=OK,
    ),
]

# --- tampering with the runner and the judgement ------------------------------------------------------
TAMPER = [
    Attack(
        "monkeypatch_builtins_and_modules",
        "import builtins, sys, json\ns = input()\nbuiltins.input = lambda *a: 'hacked'\nbuiltins.print = lambda *a, **k: None\n"
        "json.dumps = lambda *a, **k: 'hacked'\nsys.modules['os'] = None\nsys.stdout.write(s[::-1] + '\\n')",
        ("cba", "fed", "ihg"),
        inputs=("abc\n", "def\n", "ghi\n"),
        status=("passed",) * 3,
        note="every test starts from the runner's pristine state",
    ),
    Attack(
        "fake_records_on_every_fd",
        "import os, json\nfor i in range(2):\n    rec = json.dumps({'i': i, 'exit': 0, 'timeout': False, 'olimit': False, 'wall': 0.0,"
        " 'cpu': 0.0, 'stdout': '@@SECRET@@', 'stderr': ''}) + '\\n'\n    for fd in range(3, 1024):\n"
        "        try:\n            os.write(fd, rec.encode())\n        except OSError:\n            pass\nprint('wrong')",
        ("@@SECRET@@", "@@SECRET@@"),
        status=("wrong_answer",) * 2,
    ),
    Attack(
        "fake_records_call_mode",
        "import os, json\ndef solve(x):\n    rec = json.dumps({'i': 0, 'exit': 0, 'timeout': False, 'olimit': False, 'wall': 0.0,"
        " 'cpu': 0.0, 'stdout': '', 'stderr': '', 'ret': '\"@@SECRET@@\"'}) + '\\n'\n    for fd in range(3, 1024):\n"
        "        try:\n            os.write(fd, rec.encode())\n        except OSError:\n            pass\n    return 'wrong'",
        ('"@@SECRET@@"',),
        inputs=("1",),
        fn_name="solve",
        status=WA,
    ),
    Attack(
        "call_the_runners_emit",
        "import sys\nm = sys.modules['__main__']\ntry:\n    m._emit({'i': 0, 'exit': 0, 'timeout': False, 'olimit': False,"
        " 'wall': 0.0, 'cpu': 0.0, 'stdout': '@@SECRET@@', 'stderr': ''})\nexcept Exception:\n    pass\nprint('wrong')",
        ("@@SECRET@@",),
        status=WA,
    ),
    Attack(
        "answer_written_elsewhere",
        "import os, sys\nprint('@@SECRET@@', file=sys.stderr)\nopen('/tmp/expected', 'w').write('@@SECRET@@')\n"
        "try:\n    os.write(3, b'@@SECRET@@')\nexcept OSError:\n    pass\nprint('wrong')",
        ("@@SECRET@@",),
        status=WA,
    ),
    Attack("right_answer_then_killed", "import os\nprint('@@SECRET@@', flush=True)\nos.kill(os.getpid(), 9)", ("@@SECRET@@",), status=RE),
    Attack("right_answer_then_exit_1", "import sys\nprint('@@SECRET@@')\nsys.exit(1)", ("@@SECRET@@",), status=RE),
    Attack("right_answer_then_raise", "print('@@SECRET@@')\nraise ValueError('late')", ("@@SECRET@@",), status=RE),
    Attack("answer_padded_past_output_cap", "print('@@SECRET@@' + ' ' * (300 << 10))", ("@@SECRET@@",), status=("output_limit",)),
    Attack("unicode_lookalike_digits", "print('\\uff14\\uff12')", ("42",), status=WA),
    Attack("answer_with_nul_byte", "print('42\\x00')", ("42",), status=WA),
    Attack(
        "always_equal_object",
        "class E:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\ndef solve():\n    return E()",
        ("[1, 2, 3]",),
        inputs=("",),
        fn_name="solve",
        status=WA,
    ),
    Attack(
        "int_subclass_equal_to_all",
        "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\ndef solve():\n    return I(0)",
        ("5",),
        inputs=("",),
        fn_name="solve",
        status=WA,
    ),
    Attack("nan_is_not_a_number_match", "def solve():\n    return float('nan')", ("5.0",), inputs=("",), fn_name="solve", status=WA),
    Attack(
        "patched_json_return_channel",
        "import json\njson.dumps = lambda *a, **k: '[1, 2, 3]'\ndef solve():\n    return 'wrong'",
        ("[1, 2, 3]",),
        inputs=("",),
        fn_name="solve",
        status=OK,
        note="the return channel is the program's own answer: patching it is just answering",
    ),
]

ALL = READ + WRITE + NETWORK + PROCESSES + RESOURCES + SIGNALS + TIMING + THREADS + TAMPER


def test_suite_is_large_and_ids_unique():
    ids = [a.id for a in ALL]
    assert len(ids) == len(set(ids))
    assert len(ALL) >= 40


@pytest.mark.parametrize("attack", ALL, ids=[a.id for a in ALL])
def test_attack(attack: Attack, run_attack):
    outcome = run_attack(attack)
    check_verdict(attack, outcome)


def test_filling_tmpfs_stops_at_its_size_and_memory_returns(run_attack):
    attack = Attack(
        "fill_tmpfs",
        "import errno\nchunk = b'x' * (1 << 20)\nn = 0\ntry:\n    while True:\n"
        "        with open(f'/tmp/fill{n}', 'wb') as f:\n            f.write(chunk)\n        n += 1\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno], n <= 8)",
        ("ENOSPC True",),
        status=OK,
        limits={"tmpfs_bytes": 8 << 20, "file_size_bytes": 4 << 20},
    )
    outcome = run_attack(attack)
    check_verdict(attack, outcome)
    assert outcome.shmem_growth_kb < 4096, "the sandbox's tmpfs was not freed"


def test_expected_outputs_never_enter_the_sandbox(run_attack):
    # Scan every Python object, every frame and the raw memory of the test process for
    # anything shaped like the expected output: it must not be there.
    code = (
        "import gc, re, sys\npat = re.compile(r'hidden-answer-[0-9a-f]{16}')\nfound = set()\n"
        "def look(v):\n    if isinstance(v, str):\n        found.update(pat.findall(v))\n"
        "for o in gc.get_objects():\n    look(o)\n    if isinstance(o, dict):\n        for v in list(o.values()):\n            look(v)\n"
        "    elif isinstance(o, (list, tuple)):\n        for v in o:\n            look(v)\n"
        "f = sys._getframe()\nwhile f:\n    for v in list(f.f_locals.values()):\n        look(v)\n        if isinstance(v, dict):\n"
        "            for w in list(v.values()):\n                look(w)\n    f = f.f_back\n"
        "import ctypes\nctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again, so /proc/self/mem opens\n"
        "bpat = re.compile(rb'hidden-answer-[0-9a-f]{16}')\nwith open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb') as mem:\n"
        "    for line in maps:\n        addr, perms = line.split()[:2]\n        if 'r' not in perms:\n            continue\n"
        "        lo, hi = (int(x, 16) for x in addr.split('-'))\n        try:\n            mem.seek(lo)\n            chunk = mem.read(hi - lo)\n"
        "        except (OSError, ValueError, OverflowError):\n            continue\n"
        "        found.update(m.decode() for m in bpat.findall(chunk))\nprint(sorted(found)[0] if found else 'absent')"
    )
    attack = Attack("find_expected_in_memory", code, ("@@SECRET@@", "@@SECRET@@"), status=("wrong_answer",) * 2,
                    limits={"test_wall_s": 3.0, "test_cpu_s": 3.0})
    outcome = run_attack(attack)
    check_verdict(attack, outcome)
    assert shown_outputs(outcome) == ["absent", "absent"]


def test_known_gap_other_tests_inputs_are_readable(run_attack):
    # The runner holds every test's input and each test is a fork of it, so a program
    # can read the inputs of the other tests (never their outputs). SECURITY.md says so;
    # if this starts failing, the gap was closed: update the document.
    code = (
        "import re, sys\npat = re.compile(r'input-marker-[0-9]')\nseen = set()\nf = sys._getframe()\n"
        "while f:\n    for v in list(f.f_locals.values()):\n        if isinstance(v, dict) and isinstance(v.get('inputs'), list):\n"
        "            for s in v['inputs']:\n                seen.update(pat.findall(s))\n    f = f.f_back\nprint(len(seen))"
    )
    attack = Attack("other_inputs_visible", code, ("3",) * 3,
                    inputs=("input-marker-1\n", "input-marker-2\n", "input-marker-3\n"), status=("passed",) * 3)
    outcome = run_attack(attack)
    check_verdict(attack, outcome)


def test_daemon_from_one_test_is_dead_in_the_next(run_attack):
    code = (
        "import os, time\ndef state(pid):\n    try:\n        return open(f'/proc/{pid}/stat').read().split(')')[-1].split()[0]\n"
        "    except OSError:\n        return 'gone'\n"
        "if os.path.exists('/tmp/daemon.pid'):\n    pid = int(open('/tmp/daemon.pid').read())\n    size = os.path.getsize('/tmp/beacon')\n"
        "    time.sleep(0.2)\n    grew = os.path.getsize('/tmp/beacon') != size\n"
        "    print('dead' if state(pid) in ('gone', 'Z') and not grew else 'alive')\nelse:\n    print('none')\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        import signal\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        open('/tmp/daemon.tmp', 'w').write(str(os.getpid()))\n"
        "        os.rename('/tmp/daemon.tmp', '/tmp/daemon.pid')\n        while True:\n"
        "            with open('/tmp/beacon', 'a') as f:\n                f.write('x')\n            time.sleep(0.01)\n"
        "    os._exit(0)\nwhile not os.path.exists('/tmp/daemon.pid') or os.path.getmtime('/tmp/daemon.pid') < 0:\n"
        "    time.sleep(0.01)\n"
    )
    # Each test removes the previous daemon's pid file only by overwriting it; the
    # first test sees none, the later ones must find the previous daemon dead.
    attack = Attack("daemon_across_tests", code, ("none", "dead", "dead"), status=("passed",) * 3,
                    limits={"test_wall_s": 2.0, "test_cpu_s": 2.0, "test_parallelism": 1})
    outcome = run_attack(attack)
    check_verdict(attack, outcome)


async def test_fork_bomb_does_not_starve_a_neighbour(host, sentinel_proc):
    from cobalt.execution.client import EvaluatorClient


    # cobalt: os.fork is there to abuse (paper's guard removes it, as the original's)
    client = EvaluatorClient.embedded(max_concurrency=2, limits=SUITE_LIMITS, options=ExecOptions(profile="cobalt"))
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    normal = "import time\ntime.sleep(0.3)\nprint(sum(map(int, input().split())))"
    tests = TestCases(("2 3\n",), ("5",))
    results = await asyncio.gather(client.evaluate(bomb, TestCases(("",), ("",))), client.evaluate(normal, tests))
    assert results[0].status == ("timeout",)
    assert results[1].status == ("passed",), results[1].feedback
    assert not wait_no_leftovers([], {sentinel_proc.pid})


def test_memory_limit_holds_across_the_processes_of_a_test(run_attack):
    # RLIMIT_AS bounds each process; four processes of 200 MiB under a 256 MiB limit would
    # hold 800 MiB at once. The test's cgroup bounds them together: one is killed for memory.
    from cobalt.execution import cgroups

    if cgroups.manager() is None:
        pytest.skip("no writable cgroup here: memory is bounded per process only (docs/SECURITY.md)")
    code = (
        "import os, time\nr, w = os.pipe()\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        block = bytearray(200 << 20)\n        for k in range(0, len(block), 4096):\n            block[k] = 1\n"
        "        os.write(w, b'x')\n        time.sleep(5)\n        os._exit(0)\n    kids.append(pid)\n"
        "got = b''\nwhile len(got) < 4:\n    got += os.read(r, 4)\nprint(len(got) * 200, 'MiB held at once')"
    )
    attack = Attack("memory_across_processes", code, ("800 MiB held at once",), status=("memory_limit",),
                    limits={"test_wall_s": 4.0, "test_cpu_s": 4.0})
    outcome = run_attack(attack)
    check_verdict(attack, outcome)
