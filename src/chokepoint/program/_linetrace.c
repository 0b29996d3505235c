/* The recording's trace function (record.py), its common events in C.
 *
 * Through sys.settrace a Python trace function cost about 400 ns a line event at module level
 * and 700 ns in a function (the trampoline copies the frame's locals to a dict and back around
 * every call), which made a pure-Python loop 14-25x slower under `chokepoint run`. This one is
 * installed with PyEval_SetTrace (and called as sys.settrace's function where code restores it
 * from sys.gettrace(), see hook_call). It takes the common events itself, in the objects the
 * Python hooks use:
 *   - a line of the traced frame on top that moves on to a statement already seen, with
 *     nothing to capture and no first execution to finish;
 *   - a call of the user's code seen before (its entry pushed), and its return;
 *   - a call of a library function seen before (counted in the calling statement).
 * It hands the rest to the Python hooks unchanged, with the clock read at the event: calls to
 * `Recorder._global`, the traced frame's other events to `Recorder._local`. Other frames'
 * events return at once. One clock read an event: the hook's own time after it lands in the
 * next statement's, and is taken out with the rest of its cost per event
 * (`Recorder.hook_cost_ns`).
 *
 * `Counts` is the base of `record.LineStat`: the counters live in C fields, so that this hook
 * adds to them without Python objects. A stack entry is the list `Recorder._entry` makes.
 *
 * Page faults: a statement whose runs so far averaged FAULT_LINE_NS or more gets its minor
 * page faults counted (getrusage, about 0.3-0.7 us a read) from its start to the start of the
 * next statement of its frame (a return, an exception and an event for the Python hooks end
 * the window too), in `faults` over `fault_hits` runs, and what its runs grew the most
 * resident memory seen at these reads by, in `rss_grown` (/proc/self/statm). A run that calls the user's code (a
 * function, a comprehension, a lambda) is not counted: its callee's faults are not its own. Fresh memory costs a program where its allocator maps and trims blocks; a replay in
 * another process may not see it, so the program's own count is the evidence.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>
#ifndef _WIN32
#include <sys/resource.h>
#endif

/* the statements whose page faults are counted: those whose runs averaged this long (two
 * reads of the count cost at most 1.3 us, 4% of such a run, taken out with the hook's cost) */
#define FAULT_LINE_NS 30000

/* a stack entry's items (record.Recorder._entry) */
enum { E_FRAME, E_STAT, E_RAW, E_T0, E_PENDING, E_FIRST, E_CACHE, E_COMP, E_SIZE };

typedef struct {
    PyObject_HEAD
    long long ns;     /* its own time, nanoseconds */
    long long events; /* calls of the hook that landed in its time */
    long long hits;   /* its executions */
    long long state;  /* 0: capture wanted; 1: captured; 2: copy at next hit; 3: not captured */
    long long library_calls; /* library Python functions it called (each a call of the hook) */
    long long user_calls;    /* the user's functions it called */
    long long library_lines; /* lines the library functions it called ran (each an event) */
    long long faults;        /* minor page faults in its counted runs */
    long long fault_hits;    /* its runs whose page faults were counted */
    long long rss_grown;     /* bytes those runs grew the process's resident peak by */
} Counts;

static PyMemberDef counts_members[] = {
    {"ns", T_LONGLONG, offsetof(Counts, ns), 0, "its own time, nanoseconds"},
    {"events", T_LONGLONG, offsetof(Counts, events), 0, "calls of the hook in its time"},
    {"hits", T_LONGLONG, offsetof(Counts, hits), 0, "its executions"},
    {"state", T_LONGLONG, offsetof(Counts, state), 0, "its capture's state"},
    {"library_calls", T_LONGLONG, offsetof(Counts, library_calls), 0,
     "library Python functions it called"},
    {"user_calls", T_LONGLONG, offsetof(Counts, user_calls), 0, "the user's functions it called"},
    {"library_lines", T_LONGLONG, offsetof(Counts, library_lines), 0,
     "lines the library functions it called ran"},
    {"faults", T_LONGLONG, offsetof(Counts, faults), 0, "minor page faults in its counted runs"},
    {"fault_hits", T_LONGLONG, offsetof(Counts, fault_hits), 0,
     "its runs whose page faults were counted"},
    {"rss_grown", T_LONGLONG, offsetof(Counts, rss_grown), 0,
     "bytes its counted runs grew the process's resident peak by (as the hook saw it)"},
    {NULL},
};

static PyTypeObject CountsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chokepoint.program._linetrace.Counts",
    .tp_doc = "A statement's counters, kept in C for the line hook.",
    .tp_basicsize = sizeof(Counts),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = counts_members,
};

typedef struct {
    PyObject_HEAD
    PyObject *stack;  /* the recorder's list of entries */
    PyObject *local;  /* Recorder._local: a user frame's events but the common line */
    PyObject *global; /* Recorder._global: calls */
    PyObject *user;   /* Recorder._user: id(code) -> (code, whether it is the user's) */
    PyObject *codes;  /* Recorder._code_lines: id(code) -> (code, line -> statement, comp) */
    int active;       /* installed, and not uninstalled since */
    PyObject *fault_stat;  /* the Counts whose page faults are being counted, or NULL */
    long long fault_start; /* the process's page faults when its window opened */
    long long rss_start;   /* the process's resident memory (bytes) when its window opened */
    long long rss_peak;    /* the most resident memory the windows' reads have seen */
} Hook;

static PyObject *s_call, *s_line, *s_return, *s_exception; /* the events' names */
static PyObject *s_f_trace; /* the frame attribute set at each call of the user's code */
static PyObject *s_f_trace_lines; /* off for a library function's frame while it runs */

/* the clock of time.perf_counter_ns(): the Python hook reads it too */
static inline long long
now_ns(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t t;
    (void)PyTime_PerfCounterRaw(&t);
    return (long long)t;
#else
    return (long long)_PyTime_GetPerfCounter();
#endif
}

#ifdef __linux__
#include <fcntl.h>
#include <unistd.h>
static int statm_fd = -2;     /* /proc/self/statm, opened at the first read (-1: unreadable) */
static pid_t statm_pid = 0;   /* the process that opened it: /proc/self is resolved at open */
#endif

/* the process's resident memory in bytes (0: not known here). The faults of a run that grows
 * the most resident memory seen so far touch for the first time memory the program keeps,
 * whatever the code; faults beyond them touch again memory it had (getrusage's ru_maxrss is
 * no measure of that peak: a process inherits its parent's across exec) */
static long long
rss_now(void)
{
#ifdef __linux__
    char text[96];
    pid_t pid = getpid();
    if (statm_fd == -2 || statm_pid != pid) { /* a forked child reads its own */
        if (statm_fd >= 0 && statm_pid != pid)
            close(statm_fd);
        statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        statm_pid = pid;
    }
    if (statm_fd < 0)
        return 0;
    ssize_t n = pread(statm_fd, text, sizeof(text) - 1, 0);
    if (n <= 0)
        return 0;
    text[n] = 0;
    long long size = 0, resident = 0;
    if (sscanf(text, "%lld %lld", &size, &resident) != 2)
        return 0;
    return resident * (long long)sysconf(_SC_PAGESIZE);
#else
    return 0;
#endif
}

/* the process's minor page faults so far (-1: not known here), and its resident memory */
static inline long long
faults_now(long long *rss)
{
#ifdef _WIN32
    *rss = 0;
    return -1;
#else
    struct rusage usage;
    *rss = rss_now();
    return getrusage(RUSAGE_SELF, &usage) == 0 ? (long long)usage.ru_minflt : -1;
#endif
}

/* a page-fault window opens for statement ``stat``: the faults and resident memory now (the
 * memory resident here counts in the peak, whichever statement grew it) */
static inline void
open_window(Hook *self, PyObject *stat)
{
    Py_INCREF(stat);
    self->fault_stat = stat;
    self->fault_start = faults_now(&self->rss_start);
    if (self->rss_start > self->rss_peak)
        self->rss_peak = self->rss_start;
}

/* the open page-fault window ends: its faults to its statement, or (``count`` 0: a call of
 * the user's code interrupted the run, whose faults the callee's statements count) none */
static void
close_window(Hook *self, int count)
{
    Counts *stat = (Counts *)self->fault_stat;
    long long rss = 0;
    long long faults = count ? faults_now(&rss) : -1;
    if (faults >= 0 && self->fault_start >= 0) {
        stat->faults += faults - self->fault_start;
        stat->fault_hits += 1;
        if (rss > self->rss_peak) {
            stat->rss_grown += rss - self->rss_peak;
            self->rss_peak = rss;
        }
    }
    Py_CLEAR(self->fault_stat);
}

/* ``now``, or where a window was open, the clock read again after its faults were counted:
 * the count's read lands in the statement it ends */
static inline long long
window_ended(Hook *self, long long now)
{
    if (self->fault_stat == NULL)
        return now;
    close_window(self, 1);
    return now_ns();
}

/* entry[i] = value, a new int */
static int
replace(PyObject *entry, Py_ssize_t i, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    PyObject *old = PyList_GET_ITEM(entry, i);
    PyList_SET_ITEM(entry, i, v);
    Py_DECREF(old);
    return 0;
}

/* The common line event, taken here: 1; 0: the Python hook's; -1: an error. */
static int
common_line(Hook *self, PyObject *top, PyFrameObject *frame, long long now)
{
    if (PyList_GET_ITEM(top, E_PENDING) != Py_None || PyList_GET_ITEM(top, E_FIRST) != Py_None
        || !PyDict_CheckExact(PyList_GET_ITEM(top, E_CACHE)))
        return 0; /* a capture or a first execution to finish */
    int lineno = PyFrame_GetLineNumber(frame);
    PyObject *key = PyLong_FromLong(lineno);
    if (key == NULL)
        return -1;
    PyObject *new = PyDict_GetItemWithError(PyList_GET_ITEM(top, E_CACHE), key); /* borrowed */
    Py_DECREF(key);
    if (new == NULL)
        return PyErr_Occurred() ? -1 : 0; /* a line not mapped yet */
    PyObject *stat = PyList_GET_ITEM(top, E_STAT);
    if (!PyObject_TypeCheck(new, &CountsType)
        || (stat != Py_None && !PyObject_TypeCheck(stat, &CountsType)))
        return 0;
    long long raw = PyLong_AsLongLong(PyList_GET_ITEM(top, E_RAW));
    long long t0 = PyLong_AsLongLong(PyList_GET_ITEM(top, E_T0));
    if (PyErr_Occurred())
        return -1;
    int comprehension = PyList_GET_ITEM(top, E_COMP) == Py_True;
    int starts = new != stat || lineno == raw;
    Counts *next = (Counts *)new;
    /* its first execution, or a capture to take (again by reference at its 2nd, 4th, 8th...
     * execution: record.recaptured) */
    if (starts && !comprehension && (next->hits == 0 || next->state == 0 || next->state == 2
                                     || (next->state == 1 && !((next->hits + 1) & next->hits))))
        return 0;
    if (starts)
        now = window_ended(self, now);
    if (stat != Py_None) {
        ((Counts *)stat)->ns += now - t0;
        ((Counts *)stat)->events += 1; /* this call began in the previous line's time */
    }
    if (starts) {
        Py_INCREF(new);
        PyList_SET_ITEM(top, E_STAT, new);
        Py_DECREF(stat);
        if (!comprehension) { /* a comprehension's lines are its statement's one hit */
            next->hits += 1;
            if (next->hits > 1 && next->ns >= FAULT_LINE_NS * (next->hits - 1)) {
                open_window(self, new);
            }
        }
    }
    if (replace(top, E_RAW, lineno) < 0 || replace(top, E_T0, now) < 0)
        return -1;
    return 1;
}

/* a statement started by the Python hook (a capture taken again, a copy at its next run)
 * has its page faults counted from here, as common_line counts them */
static void
opened_by_python(Hook *self, PyObject *top, PyObject *before, long long hits)
{
    PyObject *stat = PyList_GET_ITEM(top, E_STAT);
    if (self->fault_stat != NULL || !PyObject_TypeCheck(stat, &CountsType)
        || PyList_GET_ITEM(top, E_COMP) == Py_True)
        return;
    Counts *next = (Counts *)stat;
    if ((stat == before && next->hits == hits) || next->hits < 2
        || next->ns < FAULT_LINE_NS * (next->hits - 1))
        return;
    open_window(self, stat);
}

/* hook(frame, event, arg, now), its result dropped; -1 where it raised. ``now``, the clock at
 * the event: the cost of calling into Python is the hook's own, as in the common case */
static int
call_python(PyObject *hook, PyFrameObject *frame, PyObject *event, PyObject *arg,
            long long now, PyObject **result)
{
    PyObject *clock = PyLong_FromLongLong(now);
    if (clock == NULL)
        return -1;
    PyObject *args[4] = {(PyObject *)frame, event, arg != NULL ? arg : Py_None, clock};
    PyObject *r = PyObject_Vectorcall(hook, args, 4, NULL);
    Py_DECREF(clock);
    if (r == NULL)
        return -1;
    if (result != NULL)
        *result = r;
    else
        Py_DECREF(r);
    return 0;
}

/* the entry on top of the stack when it is a well-formed one, else NULL */
static PyObject *
top_entry(Hook *self)
{
    Py_ssize_t size = PyList_GET_SIZE(self->stack);
    PyObject *top = size ? PyList_GET_ITEM(self->stack, size - 1) : NULL;
    if (top == NULL || !PyList_CheckExact(top) || PyList_GET_SIZE(top) != E_SIZE)
        return NULL;
    return top;
}

/* the time since the entry's clock to its statement, with the hook's call that ends it */
static int
charge(PyObject *top, long long now)
{
    PyObject *stat = PyList_GET_ITEM(top, E_STAT);
    if (stat == Py_None)
        return 0;
    if (!PyObject_TypeCheck(stat, &CountsType)) {
        PyErr_SetString(PyExc_TypeError, "a stack entry's statement is not a Counts");
        return -1;
    }
    long long t0 = PyLong_AsLongLong(PyList_GET_ITEM(top, E_T0));
    if (t0 == -1 && PyErr_Occurred())
        return -1;
    ((Counts *)stat)->ns += now - t0;
    ((Counts *)stat)->events += 1;
    return 0;
}

/* A call of the user's code seen before: its entry pushed, as _global does (1); 0: for
 * _global (its code's first call: _entry makes the code's line map); -1: an error */
static int
user_call(Hook *self, PyFrameObject *frame, PyCodeObject *code, long long now)
{
    PyObject *key = PyLong_FromVoidPtr(code);
    if (key == NULL)
        return -1;
    PyObject *found = PyDict_GetItemWithError(self->codes, key); /* (code, lines, comp) */
    Py_DECREF(key);
    if (found == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 3
        || PyTuple_GET_ITEM(found, 0) != (PyObject *)code)
        return 0; /* another code object at that address since */
    PyObject *top = top_entry(self);
    if (top != NULL) {
        if (charge(top, now) < 0)
            return -1;
        PyObject *stat = PyList_GET_ITEM(top, E_STAT);
        if (stat != Py_None)
            ((Counts *)stat)->user_calls += 1; /* a Counts: charge() checked */
    }
    Py_INCREF(found); /* held: a new list can start a collection that runs Python code */
    PyObject *entry = PyList_New(E_SIZE);
    PyObject *raw = PyLong_FromLong(-1), *t0 = PyLong_FromLongLong(now);
    if (entry == NULL || raw == NULL || t0 == NULL) {
        Py_XDECREF(entry);
        Py_XDECREF(raw);
        Py_XDECREF(t0);
        Py_DECREF(found);
        return -1;
    }
    PyObject *items[E_SIZE] = {(PyObject *)frame, Py_None, raw, t0, Py_None, Py_None,
                               PyTuple_GET_ITEM(found, 1), PyTuple_GET_ITEM(found, 2)};
    for (int i = 0; i < E_SIZE; i++) {
        if (i != E_RAW && i != E_T0)
            Py_INCREF(items[i]);
        PyList_SET_ITEM(entry, i, items[i]);
    }
    Py_DECREF(found);
    /* kept out of the garbage collector's lists, which every new list otherwise walks: the
     * one cycle through an entry (its frame's f_trace is the hook, which holds the stack) is
     * broken when it is popped, at the latest by Recorder.stop() */
    PyObject_GC_UnTrack(entry);
    /* f_trace: what sys.settrace does with _global's result (where code restores the C hook
     * from sys.gettrace(), sys.settrace calls it for this frame's events) */
    int failed = PyList_Append(self->stack, entry) < 0
                 || PyObject_SetAttr((PyObject *)frame, s_f_trace, (PyObject *)self) < 0;
    Py_DECREF(entry);
    return failed ? -1 : 1;
}

/* The return of the traced frame on top with nothing to finish: its entry popped, as _local
 * does (1); 0: for _local; -1: an error */
static int
user_return(Hook *self, PyObject *top, long long now)
{
    if (PyList_GET_ITEM(top, E_PENDING) != Py_None || PyList_GET_ITEM(top, E_FIRST) != Py_None)
        return 0;
    if (charge(top, now) < 0)
        return -1;
    Py_ssize_t size = PyList_GET_SIZE(self->stack);
    if (PyList_SetSlice(self->stack, size - 1, size, NULL) < 0)
        return -1;
    PyObject *below = top_entry(self);
    return below == NULL || replace(below, E_T0, now) == 0 ? 1 : -1;
}

static int
trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Hook *self = (Hook *)obj;
    long long now = now_ns();
    int failed = 0;
    if (what == PyTrace_CALL) {
        /* a library function seen before (NumPy's Python wrappers, called in a loop): counted
         * in the calling statement, as _global counts it. A frame not the user's keeps its
         * line events: they return below (its lines not traced, as when sys.settrace's global
         * hook returns None), and nothing of it is changed that would outlive the recording */
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *user = NULL; /* Py_True, Py_False, or NULL: not seen (or an error) */
        PyObject *key = PyLong_FromVoidPtr(code);
        if (key != NULL) {
            PyObject *found = PyDict_GetItemWithError(self->user, key); /* borrowed */
            Py_DECREF(key);
            if (found != NULL && PyTuple_CheckExact(found) && PyTuple_GET_SIZE(found) == 2
                && PyTuple_GET_ITEM(found, 0) == (PyObject *)code)
                user = PyTuple_GET_ITEM(found, 1);
        }
        int done = 0;
        if (user != Py_False && self->fault_stat != NULL)
            close_window(self, 0); /* the user's code (or code not seen yet) called */
        if (user == Py_False) {
            PyObject *top = top_entry(self);
            PyObject *stat = top != NULL ? PyList_GET_ITEM(top, E_STAT) : NULL;
            if (stat != NULL && PyObject_TypeCheck(stat, &CountsType))
                ((Counts *)stat)->library_calls += 1;
            /* no line events for its lines (NumPy's np.linalg.solve runs dozens: each a call
             * of this hook, more than the function's own work), until it returns or yields */
            done = PyObject_SetAttr((PyObject *)frame, s_f_trace_lines, Py_False) < 0 ? -1 : 1;
        }
        else if (user == NULL && PyErr_Occurred())
            done = -1;
        else if (user == Py_True)
            done = user_call(self, frame, code, now);
        Py_DECREF(code);
        if (done < 0)
            failed = 1;
        else if (!done)
            failed = call_python(self->global, frame, s_call, arg, now, NULL);
    }
    else if (what == PyTrace_LINE || what == PyTrace_RETURN || what == PyTrace_EXCEPTION) {
        PyObject *top = top_entry(self);
        if (top == NULL || PyList_GET_ITEM(top, E_FRAME) != (PyObject *)frame) {
            /* not the traced frame on top (the Python hook ignores it too): a line of a
             * library function the statement on top called (on its first call, before its
             * lines were turned off), counted for the hook's cost; its return turns its
             * lines on again, so that nothing of it outlives the recording */
            PyObject *stat = top != NULL ? PyList_GET_ITEM(top, E_STAT) : NULL;
            if (what == PyTrace_LINE && stat != NULL && PyObject_TypeCheck(stat, &CountsType))
                ((Counts *)stat)->library_lines += 1;
            if (what == PyTrace_RETURN
                && PyObject_SetAttr((PyObject *)frame, s_f_trace_lines, Py_True) < 0) {
                PyEval_SetTrace(NULL, NULL);
                return -1;
            }
            return 0;
        }
        if (what != PyTrace_LINE) /* a line of the same statement leaves it open */
            now = window_ended(self, now);
        int done = what == PyTrace_LINE     ? common_line(self, top, frame, now)
                   : what == PyTrace_RETURN ? user_return(self, top, now)
                                            : 0;
        if (done < 0)
            failed = 1;
        else if (!done) {
            now = window_ended(self, now);
            PyObject *event = what == PyTrace_LINE ? s_line
                              : what == PyTrace_RETURN ? s_return : s_exception;
            PyObject *before = PyList_GET_ITEM(top, E_STAT);
            long long hits = PyObject_TypeCheck(before, &CountsType) ? ((Counts *)before)->hits
                                                                     : -1;
            Py_INCREF(before);
            Py_INCREF(top);
            failed = call_python(self->local, frame, event, arg, now, NULL);
            if (!failed && what == PyTrace_LINE && top == top_entry(self))
                opened_by_python(self, top, before, hits);
            Py_DECREF(top);
            Py_DECREF(before);
        }
    }
    if (failed) {
        /* as sys.settrace's hook does when it raises: tracing stops, the error propagates */
        PyEval_SetTrace(NULL, NULL);
        return -1;
    }
    return 0;
}

static PyObject *
hook_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *stack, *local, *global, *user, *codes;
    static char *names[] = {"stack", "local", "global_", "user", "codes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOO!O!:Hook", names, &PyList_Type, &stack,
                                     &local, &global, &PyDict_Type, &user, &PyDict_Type,
                                     &codes))
        return NULL;
    if (!PyCallable_Check(local) || !PyCallable_Check(global)) {
        PyErr_SetString(PyExc_TypeError, "local and global_ must be callable");
        return NULL;
    }
    Hook *self = (Hook *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(stack);
    Py_INCREF(local);
    Py_INCREF(global);
    Py_INCREF(user);
    Py_INCREF(codes);
    self->codes = codes;
    self->stack = stack;
    self->local = local;
    self->global = global;
    self->user = user;
    return (PyObject *)self;
}

/* hook(frame, event, arg): what sys.settrace calls when code that saved sys.gettrace() (the
 * hook) restores it (numpy.testing, doctest, debuggers, an inner recording's stop()). The hook
 * installs itself again as the C trace function and takes the event; None back: no Python
 * trace function is left on the frame */
static PyObject *
hook_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "O!UO:Hook", &PyFrame_Type, &frame, &event, &arg))
        return NULL;
    if (!((Hook *)self)->active)
        Py_RETURN_NONE; /* its recording has stopped: a frame it traced outlived it */
    int what = !PyUnicode_CompareWithASCIIString(event, "call")        ? PyTrace_CALL
               : !PyUnicode_CompareWithASCIIString(event, "line")      ? PyTrace_LINE
               : !PyUnicode_CompareWithASCIIString(event, "return")    ? PyTrace_RETURN
               : !PyUnicode_CompareWithASCIIString(event, "exception") ? PyTrace_EXCEPTION
                                                                       : -1;
    PyEval_SetTrace(trace, self);
    if (what >= 0 && trace(self, (PyFrameObject *)frame, what, arg) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
hook_install(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ((Hook *)self)->active = 1;
    PyEval_SetTrace(trace, self);
    Py_RETURN_NONE;
}

static PyObject *
hook_uninstall(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    ((Hook *)self)->active = 0;
    Py_RETURN_NONE;
}

static PyMethodDef hook_methods[] = {
    {"install", hook_install, METH_NOARGS,
     "Trace this thread with the hook (sys.settrace(...) or sys.settrace(None) ends it)."},
    {"uninstall", hook_uninstall, METH_NOARGS,
     "Before sys.settrace(previous): a frame it traced that calls it later changes nothing."},
    {NULL},
};

static int
hook_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(self->stack);
    Py_VISIT(self->local);
    Py_VISIT(self->global);
    Py_VISIT(self->user);
    Py_VISIT(self->codes);
    Py_VISIT(self->fault_stat);
    return 0;
}

static int
hook_clear(Hook *self)
{
    Py_CLEAR(self->stack);
    Py_CLEAR(self->local);
    Py_CLEAR(self->global);
    Py_CLEAR(self->user);
    Py_CLEAR(self->codes);
    Py_CLEAR(self->fault_stat);
    return 0;
}

static void
hook_dealloc(Hook *self)
{
    PyObject_GC_UnTrack(self);
    hook_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chokepoint.program._linetrace.Hook",
    .tp_doc = "Hook(stack, local, global_, user, codes): the recording's trace function.",
    .tp_basicsize = sizeof(Hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = hook_new,
    .tp_call = hook_call,
    .tp_methods = hook_methods,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_dealloc = (destructor)hook_dealloc,
};

/* fault_read_ns(): nanoseconds one read of the page-fault count takes here (the fastest of
 * five rounds of 1000), for the hook's cost; 0 where the count is not known */
static PyObject *
fault_read_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    long long rss;
    if (faults_now(&rss) < 0)
        return PyFloat_FromDouble(0.0);
    double best = 0.0;
    for (int round = 0; round < 5; round++) {
        long long start = now_ns();
        for (int i = 0; i < 1000; i++)
            (void)faults_now(&rss);
        double each = (now_ns() - start) / 1000.0;
        if (round == 0 || each < best)
            best = each;
    }
    return PyFloat_FromDouble(best);
}

static PyMethodDef module_methods[] = {
    {"fault_read_ns", fault_read_ns, METH_NOARGS,
     "Nanoseconds one read of the process's page-fault count takes."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_linetrace",
    .m_doc = "The recording's trace function in C (see record.py).", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__linetrace(void)
{
    if (PyType_Ready(&CountsType) < 0 || PyType_Ready(&HookType) < 0)
        return NULL;
    if ((s_call = PyUnicode_InternFromString("call")) == NULL
        || (s_line = PyUnicode_InternFromString("line")) == NULL
        || (s_return = PyUnicode_InternFromString("return")) == NULL
        || (s_exception = PyUnicode_InternFromString("exception")) == NULL
        || (s_f_trace = PyUnicode_InternFromString("f_trace")) == NULL
        || (s_f_trace_lines = PyUnicode_InternFromString("f_trace_lines")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddType(m, &CountsType) < 0 || PyModule_AddType(m, &HookType) < 0
        || PyModule_AddIntConstant(m, "FAULT_LINE_NS", FAULT_LINE_NS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
