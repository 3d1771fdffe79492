"""A seccomp-BPF deny list for sandboxed programs, assembled without libseccomp.

Example:
    >>> from sandboxes.seccomp import deny_list_filter
    >>> prog = deny_list_filter()
    >>> prog is None or len(prog) % 8 == 0
    True

The filter (x86-64 only; elsewhere ``deny_list_filter`` returns None and ``certd doctor`` says
so) kills the process on a foreign architecture or an x32 system call and answers EPERM to
calls a checked program never needs: ptrace and cross-process memory access, mount and
namespace changes, kernel modules, kexec, reboot, BPF, perf events, keyrings, io_uring,
userfaultfd, the clock, kcmp, pidfd_getfd, process_madvise and AF_VSOCK sockets; and every
call that takes a *pid* and changes that process's attributes (prlimit64, setpriority,
ioprio_set, the sched_set* calls, migrate_pages, move_pages) is refused unless it names the
caller itself (pid 0), so no run can change pid 1 or the template. bubblewrap installs the BPF
program (``--seccomp FD``) after it has built the namespaces; :func:`docker_profile` is the same
policy as a Docker seccomp profile (plus the engine's namespace-creating ``clone`` flags and
``clone3``, which bubblewrap refuses through ``--disable-userns`` and the dropped capabilities).
What a call could change that no filter refuses is compared after every run (``self_state`` in
``_cleanup.py``, ``_state`` in ``_template.py``) and the sandbox is replaced.
"""

from __future__ import annotations

import errno
import json
import platform
import struct

__all__ = [
    "DENIED_ARGS_X86_64",
    "DENIED_SYSCALLS_X86_64",
    "SELF_ONLY_SYSCALLS_X86_64",
    "deny_list_filter",
    "docker_profile",
]

# linux/arch/x86/entry/syscalls/syscall_64.tbl
DENIED_SYSCALLS_X86_64: dict[str, int] = {
    "ptrace": 101,
    "syslog": 103,
    "uselib": 134,
    "personality": 135,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "process_mrelease": 448,
}

# The calls that take a pid (or a who) and change that process: allowed only on the caller
# itself, i.e. each (argument, value) listed must hold (pid 0; which = PRIO_PROCESS or
# IOPRIO_WHO_PROCESS, whose who 0 is the caller, where PRIO_USER / IOPRIO_WHO_USER with who 0
# would mean every process of the uid). Otherwise a program could lower the zygote's or the
# template's rlimits (prlimit is allowed between processes of one uid), deprioritise them or
# put them in the idle I/O class: EPERM instead. Calls taking a pid that only read (getpriority,
# sched_get*, ioprio_get) are left alone; kill/tgkill/pidfd_send_signal cannot harm pid 1 of a
# namespace and the template is replaced when it dies; ptrace, process_vm_*, kcmp, pidfd_getfd
# and process_madvise are denied outright (DENIED_SYSCALLS_X86_64).
SELF_ONLY_SYSCALLS_X86_64: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {
    "setpriority": (141, ((0, 0), (1, 0))),  # which = PRIO_PROCESS, who = 0
    "sched_setparam": (142, ((0, 0),)),
    "sched_setscheduler": (144, ((0, 0),)),
    "sched_setaffinity": (203, ((0, 0),)),
    "ioprio_set": (251, ((0, 1), (1, 0))),  # which = IOPRIO_WHO_PROCESS, who = 0
    "migrate_pages": (256, ((0, 0),)),
    "get_robust_list": (274, ((0, 0),)),
    "move_pages": (279, ((0, 0),)),
    "prlimit64": (302, ((0, 0),)),
    "sched_setattr": (314, ((0, 0),)),
}

# Calls refused when an argument has a value: socket(AF_VSOCK, ...) reaches the hypervisor's
# vsock transport, which no network namespace isolates.
_AF_VSOCK = 40
DENIED_ARGS_X86_64: dict[str, tuple[int, int, int]] = {"socket": (41, 0, _AF_VSOCK)}
# clone(2) flags that create a namespace: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET, NEWTIME.
_CLONE_NAMESPACE_FLAGS: tuple[int, ...] = (
    0x20000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x80,
)

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
# linux/filter.h, linux/bpf_common.h, linux/seccomp.h
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARGS = 16  # struct seccomp_data: 8 bytes per argument, low word first


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def deny_list_filter() -> bytes | None:
    """Assemble the filter as raw ``struct sock_filter`` bytes.

    Returns:
        The BPF program for ``bwrap --seccomp``, or None on a machine that is not x86-64.
    """
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    denied = sorted(set(DENIED_SYSCALLS_X86_64.values()))
    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
        _insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
    ]
    # Jumps to the final EPERM are resolved once the program's length is known.
    to_eperm: list[int] = []
    for nr, checks in SELF_ONLY_SYSCALLS_X86_64.values():
        block = 4 * len(checks) + 1  # per argument: load and test both words; then allow
        prog.append(_insn(_JEQ_K, 0, block, nr))
        for arg, value in checks:
            for word, expect in ((0, value & 0xFFFFFFFF), (4, value >> 32)):
                prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_ARGS + 8 * arg + word))
                to_eperm.append(len(prog))
                prog.append(_insn(_JEQ_K, 0, 0, expect))  # equal ? next : EPERM (jf below)
        prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    for nr, arg, value in DENIED_ARGS_X86_64.values():  # the kernel reads the low word (int)
        prog.append(_insn(_JEQ_K, 0, 3, nr))
        prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_ARGS + 8 * arg))
        to_eperm.append(-len(prog))  # negative: a jt (equal ? EPERM : next)
        prog.append(_insn(_JEQ_K, 0, 0, value))
        prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    n = len(denied)
    for i, nr in enumerate(denied):  # one JEQ per denied number, jumping to the EPERM return
        prog.append(_insn(_JEQ_K, n - i, 0, nr))
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    eperm = len(prog)
    prog.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    for at in to_eperm:
        code, _, _, k = struct.unpack("<HBBI", prog[abs(at)])
        off = eperm - abs(at) - 1
        assert off < 256, "a BPF jump offset is 8 bits"
        prog[abs(at)] = _insn(code, off, 0, k) if at < 0 else _insn(code, 0, off, k)
    return b"".join(prog)


def docker_profile() -> str:
    """The same policy as :func:`deny_list_filter`, as a Docker seccomp profile (JSON).

    Allow by default (capabilities are dropped and ``no-new-privileges`` is set), EPERM for
    the denied calls, for the pid-taking calls aimed at another process, for AF_VSOCK sockets
    and for ``clone`` with a namespace flag; ENOSYS for ``clone3`` (whose flags live in memory a
    filter cannot read), so the C library falls back to ``clone``.

    Returns:
        The profile, for ``security_opt=["seccomp=" + docker_profile()]``.
    """
    eperm = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict[str, object]] = [{"names": sorted(DENIED_SYSCALLS_X86_64), **eperm}]
    for name, (_, checks) in SELF_ONLY_SYSCALLS_X86_64.items():
        for arg, value in checks:  # one rule per argument: rules are or-ed
            ne = {"index": arg, "value": value, "valueTwo": 0, "op": "SCMP_CMP_NE"}
            rules.append({"names": [name], **eperm, "args": [ne]})
    for name, (_, arg, value) in DENIED_ARGS_X86_64.items():
        eq = {"index": arg, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}
        rules.append({"names": [name], **eperm, "args": [eq]})
    for flag in _CLONE_NAMESPACE_FLAGS:
        masked = {"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
        rules.append({"names": ["clone"], **eperm, "args": [masked]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    profile: dict[str, object] = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}
    if platform.machine() in ("x86_64", "AMD64"):  # elsewhere: the engine's native arch only
        profile["architectures"] = ["SCMP_ARCH_X86_64"]  # i386 and x32 calls: the bad-arch kill
    return json.dumps(profile, separators=(",", ":"))
