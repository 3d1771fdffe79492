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
userfaultfd and the clock; and it refuses prlimit, setpriority and the scheduler calls aimed
at any process but the caller (so a run cannot weaken the zygote or the template). bubblewrap
installs it (``--seccomp FD``) after it has built the namespaces. Docker uses the engine's
default profile instead, which allows those calls between processes of one uid: there the
zygote and the template notice the change after the run and the sandbox is replaced.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED_SYSCALLS_X86_64", "SELF_ONLY_SYSCALLS_X86_64", "deny_list_filter"]

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
    "mount_setattr": 442,
}

# Calls allowed only on the caller itself: each argument listed must be 0 (pid 0 / PRIO_PROCESS
# and who 0). Otherwise a program could lower the zygote's or the template's rlimits (prlimit is
# allowed between processes of one uid) or deprioritise them: EPERM instead.
SELF_ONLY_SYSCALLS_X86_64: dict[str, tuple[int, tuple[int, ...]]] = {
    "setpriority": (141, (0, 1)),
    "sched_setparam": (142, (0,)),
    "sched_setscheduler": (144, (0,)),
    "sched_setaffinity": (203, (0,)),
    "prlimit64": (302, (0,)),
    "sched_setattr": (314, (0,)),
}

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
    for nr, args in SELF_ONLY_SYSCALLS_X86_64.values():
        block = 4 * len(args) + 1  # per argument: load and test both words; then allow
        prog.append(_insn(_JEQ_K, 0, block, nr))
        for arg in args:
            for word in (0, 4):
                prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_ARGS + 8 * arg + word))
                to_eperm.append(len(prog))
                prog.append(b"")  # JEQ 0 ? next : EPERM, filled below
        prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    n = len(denied)
    for i, nr in enumerate(denied):  # one JEQ per denied number, jumping to the EPERM return
        prog.append(_insn(_JEQ_K, n - i, 0, nr))
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    eperm = len(prog)
    prog.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    for at in to_eperm:
        assert eperm - at - 1 < 256, "a BPF jump offset is 8 bits"
        prog[at] = _insn(_JEQ_K, 0, eperm - at - 1, 0)
    return b"".join(prog)
