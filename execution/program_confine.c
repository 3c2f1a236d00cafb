/* The system calls a code-grader program's process needs to confine itself, and nothing else.
 *
 * Built on the host by execution/program_confine_build.py (Python's limited API, so one build serves the container's
 * Python 3.11 whatever the host's is) and loaded by program_driver.py in the empty interpreter, in place of
 * ctypes: ctypes, once imported there, stays reachable from every forked program (its classes through
 * object.__subclasses__, its extension through a fresh load) and writes any memory with no audit event.
 *
 * Every function here can only take something away from the process that calls it: no new privileges, a seccomp
 * filter (they stack: a later one can only refuse more), a landlock domain (the same).  So a program that reached
 * this module anyway could only confine itself further.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LANDLOCK_CREATE_RULESET 444 /* the same numbers on x86_64 and aarch64 */
#define LANDLOCK_ADD_RULE 445
#define LANDLOCK_RESTRICT_SELF 446
#define LANDLOCK_CREATE_RULESET_VERSION 1U
#define LANDLOCK_RULE_PATH_BENEATH 1

struct bpf_insn { /* struct sock_filter */
    uint16_t code;
    uint8_t jt;
    uint8_t jf;
    uint32_t k;
};

struct bpf_program { /* struct sock_fprog */
    unsigned short len;
    struct bpf_insn *filter;
};

struct path_beneath { /* struct landlock_path_beneath_attr */
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static PyObject *no_new_privs(PyObject *self, PyObject *unused) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *not_dumpable(PyObject *self, PyObject *unused) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* seccomp_filter(program: bytes): install a classic-BPF seccomp filter (8 bytes per instruction); the kernel asks
 * for no_new_privs first. */
static PyObject *seccomp_filter(PyObject *self, PyObject *args) {
    const char *bytes;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y#", &bytes, &size))
        return NULL;
    if (size <= 0 || size % (Py_ssize_t)sizeof(struct bpf_insn) != 0 || size / 8 > 4096) {
        PyErr_SetString(PyExc_ValueError, "a seccomp filter is 1 to 4096 instructions of 8 bytes");
        return NULL;
    }
    struct bpf_program program = {(unsigned short)(size / 8), (struct bpf_insn *)bytes};
    if (prctl(PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, &program, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* landlock_abi() -> int: the kernel's landlock ABI version, below 1 when it has none. */
static PyObject *landlock_abi(PyObject *self, PyObject *unused) {
    long abi = syscall(LANDLOCK_CREATE_RULESET, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return PyLong_FromLong(abi < 0 ? -errno : abi);
}

/* landlock_ruleset(handled: int) -> int: a new ruleset's descriptor, handling the given file rights. */
static PyObject *landlock_ruleset(PyObject *self, PyObject *args) {
    unsigned long long handled;
    if (!PyArg_ParseTuple(args, "K", &handled))
        return NULL;
    uint64_t attr = handled; /* struct landlock_ruleset_attr: handled_access_fs only */
    long fd = syscall(LANDLOCK_CREATE_RULESET, &attr, sizeof attr, 0);
    if (fd < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(fd);
}

/* landlock_allow(ruleset: int, path_fd: int, rights: int): allow ``rights`` beneath the folder or file open at
 * ``path_fd`` (O_PATH) in the ruleset. */
static PyObject *landlock_allow(PyObject *self, PyObject *args) {
    int ruleset, path_fd;
    unsigned long long rights;
    if (!PyArg_ParseTuple(args, "iiK", &ruleset, &path_fd, &rights))
        return NULL;
    struct path_beneath attr = {rights, path_fd};
    if (syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* landlock_restrict(ruleset: int): this process (and what it forks) is held to the ruleset from now on. */
static PyObject *landlock_restrict(PyObject *self, PyObject *args) {
    int ruleset;
    if (!PyArg_ParseTuple(args, "i", &ruleset))
        return NULL;
    if (syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"no_new_privs", no_new_privs, METH_NOARGS, "prctl(PR_SET_NO_NEW_PRIVS, 1)"},
    {"not_dumpable", not_dumpable, METH_NOARGS, "prctl(PR_SET_DUMPABLE, 0)"},
    {"seccomp_filter", seccomp_filter, METH_VARARGS, "install a seccomp filter (classic BPF bytes)"},
    {"landlock_abi", landlock_abi, METH_NOARGS, "the kernel's landlock ABI (below 1: none)"},
    {"landlock_ruleset", landlock_ruleset, METH_VARARGS, "a new landlock ruleset for the handled rights"},
    {"landlock_allow", landlock_allow, METH_VARARGS, "allow rights beneath an O_PATH descriptor"},
    {"landlock_restrict", landlock_restrict, METH_VARARGS, "enforce a landlock ruleset on this process"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_program_confine", NULL, -1, methods};

PyMODINIT_FUNC PyInit__program_confine(void) { return PyModule_Create(&module); }
