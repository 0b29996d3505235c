/* The public functions' common call in C: plain NumPy arrays, checked here and computed by a
 * numba cfunc (see native.py, which compiles this file on first use).
 *
 * A call through Python cost about 1.5-2 us before its kernel ran (the public function's
 * checks, api.call_fast, numba's dispatcher, which unboxes every array into a new
 * reference-counted structure); NumPy's whole ufunc call on 1000 elements costs 1.2-1.8 us.
 * Here the same checks cost tens of nanoseconds.
 *
 * A Native object is one public function's C path (or one parameter value's): a table of
 * kernels by (input type, output type), each with its constants. Calling it returns the
 * result, or None, with nothing written, where the Python path must take the call. It takes
 * C-contiguous, aligned, native-order ndarrays (not subclasses) of the table's types, of one
 * shape, with an output that is exactly an input or overlaps none, while numba's engine is in
 * use, and
 *   - below parallel_min elements: the serial kernel, without the GIL from GIL_FREE_MIN
 *     elements;
 *   - up to mid_max (below CHECKED_MAX): the variant of the chooser's live decision (an
 *     adaptive.Decision, read by its fields) while it has calls left, each call's time added
 *     to it, as api.call_fast does; parallel only where lock_free says the threading layer
 *     needs no launch lock. At a decision's end it calls the chooser (Chooser.decide, given
 *     with the decision by the Python path), runs the variant decided and records the call if
 *     asked to. A map whose arrays together reach stream_min bytes (past the last-level
 *     cache), into an output that is none of its inputs and 16-byte aligned, has its own
 *     decision, among three variants: streaming (non-temporal stores), parallel, serial.
 * Those four values are engine_numba.Settings', handed over by set_launch whenever they change;
 * this file reads no module's globals but the engine in use (backend.default_engine).
 * Validation stays in Python: None only ever sends the call there.
 *
 * Kinds (the arguments; every kernel is fn(a, b, c, n, constants)):
 *   MAP1   (x, out)          fn(x, NULL, out)
 *   MAP2   (grad, x, out)    fn(grad, x, out)
 *   MASK_FORWARD (x, out)    fn(x, y, bits): returns (y, PackedMask); the bits are new
 *   MASK_BACKWARD (grad, mask, out)  fn(bits, grad, out): mask a PackedMask of grad's shape
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#if NPY_ABI_VERSION < 0x02000000 /* NumPy 1.x headers: no accessor yet */
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#define NT 24   /* NumPy's builtin type numbers below this (float16 is 23) */
#define MAXC 8  /* constants per kernel */

enum { MAP1 = 0, MAP2 = 1, MASK_FORWARD = 2, MASK_BACKWARD = 3 };

typedef void (*kernel_fn)(void *, void *, void *, int64_t, const double *);

#define SIZES 64 /* size classes: n.bit_length() */

typedef struct {
    kernel_fn fn;             /* the serial kernel */
    kernel_fn par;            /* the parallel one (mid-size calls), NULL: none yet */
    kernel_fn str;            /* the streaming one (maps; see can_stream), NULL: none yet */
    int may_stream;           /* whether the op streams (then calls that can wait for str) */
    double c[MAXC];
    PyObject *plans[SIZES];   /* size class -> the chooser's live Decision */
    PyObject *splans[SIZES];  /* the same for the calls that can stream */
    PyObject *decide;         /* decide(n) -> (variant, timed): the chooser's next decision */
    PyObject *sdecide;        /* the same for the calls that can stream */
    PyObject *record;         /* record(n, variant, seconds): a timed call's time */
} Slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind;
    npy_intp mid_max;         /* the chooser's decided variant up to here (CHECKED_MAX - 1) */
    signed char fresh[NT]; /* input type -> the type of a new output, -1: none */
    Slot *slot[NT][NT];    /* [input type][output type], NULL: none */
    PyObject *keep;        /* the cfuncs whose code the slots point to */
    PyObject *tag;         /* MASK_FORWARD: the masks' at_zero */
} Native;

static int enabled = 1;
/* the engine in use: the ContextVar of backend.py, its module dict and numba's engine module */
static PyObject *engine_var = NULL, *backend_dict = NULL, *default_key = NULL,
                *numba_engine = NULL;
/* engine_numba.Settings (set_launch): the serial kernel below parallel_min elements; a map may
 * stream from stream_min bytes where stream_maps; parallel kernels only where lock_free. Until
 * set_launch, every call declines. */
static npy_intp parallel_min = 0, stream_min = -1;
static int stream_maps = 0, lock_free = 0;
/* kernels on at least this many elements run without the GIL (below, releasing and taking it
 * back would cost more than the call) */
#define GIL_FREE_MIN (1 << 14)
/* PackedMask, and where its slots (__slots__: _bits, _shape, _at_zero) sit in an instance */
static PyTypeObject *mask_type = NULL;
static Py_ssize_t bits_at = -1, shape_at = -1, at_zero_at = -1;
/* adaptive.Decision, and where its slots (variant, left, seconds, calls) sit */
static PyTypeObject *decision_type = NULL;
static Py_ssize_t variant_at = -1, left_at = -1, seconds_at = -1, calls_at = -1;
#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))

static int numba_in_use(void)
{
    PyObject *chosen;
    if (engine_var == NULL)
        return 0;
    if (PyContextVar_Get(engine_var, NULL, &chosen) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (chosen != NULL) {
        int none = chosen == Py_None, numba = chosen == numba_engine;
        Py_DECREF(chosen);
        if (!none)
            return numba;
    }
    PyObject *fallback = PyDict_GetItemWithError(backend_dict, default_key); /* borrowed */
    if (fallback == NULL) {
        PyErr_Clear();
        return 0;
    }
    return fallback == numba_engine;
}

#define READ (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)
#define WRITE (READ | NPY_ARRAY_WRITEABLE)

/* a plain ndarray with the flags, in native byte order, of a builtin type; its type or -1 */
static int usable(PyObject *o, int flags)
{
    if (Py_TYPE(o) != &PyArray_Type)
        return -1;
    PyArrayObject *a = (PyArrayObject *)o;
    if ((PyArray_FLAGS(a) & flags) != flags || !PyArray_ISNOTSWAPPED(a))
        return -1;
    int t = PyArray_TYPE(a);
    if (t < 0 || t >= NT || PyTypeNum_ISFLEXIBLE(t) || PyTypeNum_ISDATETIME(t))
        return -1;
    return t;
}

static int same_shape(PyArrayObject *a, PyArrayObject *b)
{
    int nd = PyArray_NDIM(a);
    if (PyArray_NDIM(b) != nd)
        return 0;
    npy_intp *da = PyArray_DIMS(a), *db = PyArray_DIMS(b);
    for (int i = 0; i < nd; i++)
        if (da[i] != db[i])
            return 0;
    return 1;
}

/* a PackedMask's bits (borrowed: the mask holds them) if it is one, of grad's shape, with
 * bits usable for n elements; else NULL, with no error set */
static PyArrayObject *mask_bits(PyObject *mask, PyArrayObject *grad, npy_intp n)
{
    if (mask_type == NULL || Py_TYPE(mask) != mask_type)
        return NULL;
    PyObject *bits = SLOT(mask, bits_at), *shape = SLOT(mask, shape_at);
    int nd = PyArray_NDIM(grad);
    if (bits == NULL || shape == NULL || !PyTuple_CheckExact(shape)
        || PyTuple_GET_SIZE(shape) != nd || usable(bits, READ) != NPY_UINT8
        || PyArray_NDIM((PyArrayObject *)bits) != 1
        || PyArray_DIM((PyArrayObject *)bits, 0) != (n + 7) / 8)
        return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *d = PyTuple_GET_ITEM(shape, i);
        if (!PyLong_CheckExact(d) || PyLong_AsSsize_t(d) != PyArray_DIM(grad, i)) {
            PyErr_Clear();
            return NULL;
        }
    }
    return (PyArrayObject *)bits; /* borrowed: the mask holds them for the call */
}

/* a new PackedMask over bits (read-only from now on) for x's shape */
static PyObject *new_mask(PyArrayObject *bits, PyArrayObject *x, PyObject *at_zero)
{
    int nd = PyArray_NDIM(x);
    PyObject *shape = PyTuple_New(nd);
    if (shape == NULL)
        return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *d = PyLong_FromSsize_t(PyArray_DIM(x, i));
        if (d == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, d);
    }
    PyObject *mask = mask_type->tp_alloc(mask_type, 0);
    if (mask == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    PyArray_CLEARFLAGS(bits, NPY_ARRAY_WRITEABLE);
    SLOT(mask, bits_at) = Py_NewRef((PyObject *)bits);
    SLOT(mask, shape_at) = shape;
    SLOT(mask, at_zero_at) = Py_NewRef(at_zero);
    return mask;
}

/* whether out's bytes overlap a's other than exactly (same start, same item size) */
static int clash(PyArrayObject *out, PyArrayObject *a, int exact_ok)
{
    char *o = PyArray_BYTES(out), *p = PyArray_BYTES(a);
    npy_intp on = PyArray_NBYTES(out), pn = PyArray_NBYTES(a);
    if (!(o < p + pn && p < o + on))
        return 0;
    return !(exact_ok && o == p && PyArray_ITEMSIZE(out) == PyArray_ITEMSIZE(a));
}

/* the slot for x's type and out's (or, out None, the type of a new output); NULL: decline */
static Slot *find_slot(Native *self, PyObject *out, PyArrayObject *x, int tin, int *tout)
{
    if (out == Py_None) {
        *tout = self->fresh[tin];
    } else {
        *tout = usable(out, WRITE);
        if (*tout >= 0 && !same_shape((PyArrayObject *)out, x))
            return NULL;
    }
    Slot *slot = *tout < 0 ? NULL : self->slot[tin][*tout];
    return (slot == NULL || slot->fn == NULL) ? NULL : slot;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether a mid-size map call can stream (as engine_numba.can_stream): its arrays together at
 * least stream_min bytes, and y (NULL: a new output of type tout, checked once made) 16-byte
 * aligned and overlapping no input; for an op that streams (slot->may_stream). */
static int can_stream(Native *self, Slot *slot, PyArrayObject *x, PyArrayObject *a,
                      PyArrayObject *y, int tout, npy_intp n)
{
    if (!slot->may_stream || (self->kind != MAP1 && self->kind != MAP2))
        return 0;
    if (!stream_maps)
        return 0;
    npy_intp out_size;
    if (y == NULL) {
        PyArray_Descr *descr = PyArray_DescrFromType(tout);
        if (descr == NULL) {
            PyErr_Clear();
            return 0;
        }
        out_size = PyDataType_ELSIZE(descr);
        Py_DECREF(descr);
    } else {
        if (((uintptr_t)PyArray_DATA(y) & 15) || clash(y, x, 0)
            || (self->kind == MAP2 && clash(y, a, 0)))
            return 0;
        out_size = PyArray_ITEMSIZE(y);
    }
    npy_intp each = PyArray_ITEMSIZE(x) * (self->kind == MAP2 ? 2 : 1) + out_size;
    /* n * each >= stream_min, without overflow */
    return stream_min >= 0 && n >= stream_min / each + (stream_min % each != 0);
}

/* the slot's kernel for a variant the chooser named; NULL: none here */
static kernel_fn variant_kernel(Slot *slot, PyObject *variant)
{
    if (!PyUnicode_Check(variant))
        return NULL;
    if (PyUnicode_CompareWithASCIIString(variant, "serial") == 0)
        return slot->fn;
    if (PyUnicode_CompareWithASCIIString(variant, "parallel") == 0)
        return slot->par;
    if (PyUnicode_CompareWithASCIIString(variant, "stream") == 0)
        return slot->str;
    return NULL;
}

/* An error raised in the chooser's Python: an Exception is cleared (the call is declined, or
 * its time dropped); anything else (KeyboardInterrupt, SystemExit) stays set, to propagate:
 * 1 then, else 0. */
static int keep_error(void)
{
    if (!PyErr_Occurred())
        return 0;
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The end of a period: the chooser decides (slot->decide, as api.call_fast calls it), and this
 * call runs the variant it decided, uncounted; *timed a new reference to the variant where the
 * chooser asked for this call's time (then record it). NULL: decline, before or after the
 * decision (the Python path then decides again), or with an error set to propagate
 * (keep_error). */
static kernel_fn decide_now(Slot *slot, npy_intp n, PyObject **timed, int streaming)
{
    PyObject *decider = streaming ? slot->sdecide : slot->decide;
    if (decider == NULL || slot->record == NULL)
        return NULL;
    PyObject *decide = Py_NewRef(decider); /* held: add_plan may replace it meanwhile */
    PyObject *size = PyLong_FromSsize_t(n);
    PyObject *got = size == NULL ? NULL : PyObject_CallOneArg(decide, size);
    Py_XDECREF(size);
    Py_DECREF(decide);
    kernel_fn fn = NULL;
    if (got != NULL && PyTuple_CheckExact(got) && PyTuple_GET_SIZE(got) == 2) {
        PyObject *variant = PyTuple_GET_ITEM(got, 0);
        int wanted = PyObject_IsTrue(PyTuple_GET_ITEM(got, 1));
        fn = wanted < 0 ? NULL : variant_kernel(slot, variant);
        if (fn != NULL && wanted)
            *timed = Py_NewRef(variant);
    }
    Py_XDECREF(got);
    keep_error();
    return fn;
}

/* A Decision's slot: a new value there (stolen; NULL: an error to clear) */
static int set_slot(PyObject *decision, Py_ssize_t at, PyObject *value)
{
    if (value == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_XSETREF(SLOT(decision, at), value);
    return 0;
}

/* A mid-size call: the variant the chooser decided, for a call it decided it for (as
 * api.call_fast: left decremented; the call's seconds and 1 added to the decision, for the
 * next one; at a period's end the chooser decides here, see decide_now). NULL: decline (no
 * parallel kernel yet, or a threading layer that needs the launch lock); *plan a new
 * reference to the Decision where the call counts in it, *timed see decide_now. */
static kernel_fn decided(Native *self, Slot *slot, npy_intp n, PyObject **plan,
                         PyObject **timed, int streaming)
{
    *plan = NULL;
    *timed = NULL;
    if (n <= 0 || n > self->mid_max || slot->par == NULL || !lock_free)
        return NULL;
    int size = 64 - __builtin_clzll((unsigned long long)n);
    /* a call that can stream waits (declines) for its kernel and decision: the Python path's
     * call gives them (api.call_fast) */
    PyObject *live = size >= SIZES || (streaming && slot->str == NULL) ? NULL
        : streaming ? slot->splans[size] : slot->plans[size];
    if (live == NULL)
        return NULL;
    PyObject *left = SLOT(live, left_at);
    if (left == NULL || !PyLong_CheckExact(left))
        return NULL;
    Py_ssize_t calls = PyLong_AsSsize_t(left);
    if (calls == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (calls <= 0)
        return decide_now(slot, n, timed, streaming);
    PyObject *variant = SLOT(live, variant_at);
    kernel_fn fn = variant == NULL ? NULL : variant_kernel(slot, variant);
    if (fn == NULL || set_slot(live, left_at, PyLong_FromSsize_t(calls - 1)) < 0)
        return NULL;
    *plan = Py_NewRef(live);
    return fn;
}

/* adaptive.PERIOD_MAX (set_period_max): a decision whose calls have taken this long ends early */
static double period_max = 0.01;

/* adds a call's seconds to its Decision (see decided), as Decision.count: ends the period
 * (none left: the next call decides) once its calls have taken period_max seconds */
static void count(PyObject *plan, double seconds)
{
    PyObject *was = SLOT(plan, seconds_at), *made = SLOT(plan, calls_at);
    if (was == NULL || made == NULL)
        return;
    double total = PyFloat_AsDouble(was) + seconds;
    Py_ssize_t calls = PyLong_AsSsize_t(made);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return;
    }
    if (set_slot(plan, seconds_at, PyFloat_FromDouble(total)) < 0
        || set_slot(plan, calls_at, PyLong_FromSsize_t(calls + 1)) < 0)
        return;
    if (total > period_max)
        set_slot(plan, left_at, PyLong_FromLong(0));
}

static PyObject *run(Native *self, kernel_fn fn, Slot *slot, PyArrayObject *x,
                     PyArrayObject *a, PyArrayObject *y, npy_intp n);

/* a decided call's time, for the chooser (slot->record); an Exception there is dropped, as
 * the call's result stands; -1 where another error must propagate (keep_error) */
static int record_call(Slot *slot, npy_intp n, PyObject *variant, double seconds)
{
    PyObject *record = slot->record == NULL ? NULL : Py_NewRef(slot->record);
    if (record == NULL)
        return 0;
    PyObject *got = PyObject_CallFunction(record, "nOd", n, variant, seconds);
    Py_XDECREF(got);
    Py_DECREF(record);
    return keep_error() ? -1 : 0;
}

static PyObject *native_call(PyObject *op, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    Native *self = (Native *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t want = (self->kind == MAP2 || self->kind == MASK_BACKWARD) ? 3 : 2;
    if (kwnames != NULL || nargs != want) {
        PyErr_Format(PyExc_TypeError, "Native takes %zd positional arguments", want);
        return NULL;
    }
    if (!enabled)
        Py_RETURN_NONE;
    /* x gives type, shape and size (grad, from a mask); a is grad, or the mask's bits */
    PyObject *first = args[0], *out = args[want - 1];
    PyArrayObject *x = (PyArrayObject *)(self->kind == MAP2 ? args[1] : first);
    int tin = usable((PyObject *)x, READ);
    if (tin < 0)
        Py_RETURN_NONE;
    npy_intp n = PyArray_SIZE(x), serial_below = parallel_min;
    if (n >= serial_below && n > self->mid_max)
        Py_RETURN_NONE;
    PyArrayObject *a = (PyArrayObject *)first;
    if (self->kind == MAP2) {
        if (usable(first, READ) != tin || !same_shape(a, x))
            Py_RETURN_NONE;
    } else if (self->kind == MASK_BACKWARD) {
        a = mask_bits(args[1], x, n);
        if (a == NULL)
            Py_RETURN_NONE;
    }
    if (out != Py_None && Py_TYPE(out) != &PyArray_Type)
        Py_RETURN_NONE;
    if (!numba_in_use())
        Py_RETURN_NONE;
    int tout;
    Slot *slot = find_slot(self, out, x, tin, &tout);
    if (slot == NULL)
        Py_RETURN_NONE;
    PyArrayObject *y;
    if (out == Py_None) {
        y = NULL;
    } else {
        y = (PyArrayObject *)out;
        if (clash(y, x, 1) || (self->kind == MAP2 && clash(y, a, 1))
            || (self->kind == MASK_BACKWARD && clash(y, a, 0)))
            Py_RETURN_NONE;
    }
    /* a: grad, or the bits borrowed from the mask: held across the chooser's Python (which
     * may drop the mask's) and while the GIL is released */
    Py_INCREF(a);
    PyObject *plan = NULL, *timed = NULL;
    kernel_fn fn = n < serial_below ? slot->fn : decided(
        self, slot, n, &plan, &timed, can_stream(self, slot, x, a, y, tout, n));
    if (fn == NULL) {
        Py_DECREF(a);
        if (PyErr_Occurred()) /* an interrupt in the chooser (keep_error) */
            return NULL;
        Py_RETURN_NONE;
    }
    /* from here the call is taken */
    if (y == NULL) {
        y = (PyArrayObject *)PyArray_SimpleNew(PyArray_NDIM(x), PyArray_DIMS(x), tout);
        if (y == NULL) {
            Py_XDECREF(plan);
            Py_XDECREF(timed);
            Py_DECREF(a);
            return NULL;
        }
    } else {
        Py_INCREF(y);
    }
    if (fn == slot->str && ((uintptr_t)PyArray_DATA(y) & 15)) {
        /* a new output that cannot stream (NumPy aligns them to 16 bytes): the parallel
         * kernel, neither counted in the streaming plan nor recorded as streaming */
        fn = slot->par;
        Py_CLEAR(plan);
        Py_CLEAR(timed);
    }
    int clocked = plan != NULL || timed != NULL;
    double start = clocked ? now() : 0.0;
    PyObject *result = run(self, fn, slot, x, a, y, n);
    double seconds = clocked ? now() - start : 0.0;
    if (plan != NULL) {
        if (result != NULL)
            count(plan, seconds);
        Py_DECREF(plan);
    }
    if (timed != NULL) {
        if (result != NULL && record_call(slot, n, timed, seconds) < 0)
            Py_CLEAR(result);
        Py_DECREF(timed);
    }
    Py_DECREF(a);
    return result;
}

/* fn on three pointers; without the GIL from GIL_FREE_MIN elements (as the Python path's nogil
 * kernels: other threads run meanwhile) */
static void call(kernel_fn fn, Slot *slot, void *a, void *b, void *c, npy_intp n)
{
    if (n < GIL_FREE_MIN) {
        fn(a, b, c, n, slot->c);
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    fn(a, b, c, n, slot->c);
    Py_END_ALLOW_THREADS
}

/* runs the kernel (y: a new reference, handed to the result) */
static PyObject *run(Native *self, kernel_fn fn, Slot *slot, PyArrayObject *x,
                     PyArrayObject *a, PyArrayObject *y, npy_intp n)
{
    switch (self->kind) {
    case MAP1:
        call(fn, slot, PyArray_DATA(x), NULL, PyArray_DATA(y), n);
        return (PyObject *)y;
    case MAP2:
    case MASK_BACKWARD:
        call(fn, slot, PyArray_DATA(a), PyArray_DATA(x), PyArray_DATA(y), n);
        return (PyObject *)y;
    default: { /* MASK_FORWARD: new bits, never overlapping y */
        npy_intp nbits = (n + 7) / 8;
        PyObject *bits = PyArray_SimpleNew(1, &nbits, NPY_UINT8);
        if (bits == NULL) {
            Py_DECREF(y);
            return NULL;
        }
        call(fn, slot, PyArray_DATA(x), PyArray_DATA(y),
             PyArray_DATA((PyArrayObject *)bits), n);
        PyObject *mask = new_mask((PyArrayObject *)bits, x, self->tag);
        Py_DECREF(bits);
        if (mask == NULL) {
            Py_DECREF(y);
            return NULL;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(y);
            Py_DECREF(mask);
            return NULL;
        }
        PyTuple_SET_ITEM(pair, 0, (PyObject *)y);
        PyTuple_SET_ITEM(pair, 1, mask);
        return pair;
    }
    }
}

static PyObject *native_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int kind;
    Py_ssize_t mid_max;
    PyObject *tag = Py_None;
    static char *names[] = {"kind", "mid_max", "tag", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "in|O", names, &kind, &mid_max, &tag))
        return NULL;
    if (kind < MAP1 || kind > MASK_BACKWARD || mid_max < 0) {
        PyErr_SetString(PyExc_ValueError, "Native: bad kind or mid_max");
        return NULL;
    }
    if (kind == MASK_FORWARD && (mask_type == NULL || !PyLong_CheckExact(tag))) {
        PyErr_SetString(PyExc_ValueError, "Native: a mask kind needs configure() and an int tag");
        return NULL;
    }
    Native *self = (Native *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = native_call;
    self->kind = kind;
    self->mid_max = mid_max;
    self->tag = Py_NewRef(tag);
    memset(self->fresh, -1, sizeof(self->fresh));
    self->keep = PyList_New(0);
    if (self->keep == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void native_dealloc(Native *self)
{
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < NT; j++) {
            Slot *slot = self->slot[i][j];
            if (slot == NULL)
                continue;
            for (int k = 0; k < SIZES; k++) {
                Py_XDECREF(slot->plans[k]);
                Py_XDECREF(slot->splans[k]);
            }
            Py_XDECREF(slot->decide);
            Py_XDECREF(slot->sdecide);
            Py_XDECREF(slot->record);
            PyMem_Free(slot);
        }
    Py_XDECREF(self->keep);
    Py_XDECREF(self->tag);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int type_number(PyObject *dtype)
{
    PyArray_Descr *descr = NULL;
    if (!PyArray_DescrConverter(dtype, &descr))
        return -1;
    int t = descr->type_num;
    int native = PyArray_ISNBO(descr->byteorder);
    Py_DECREF(descr);
    if (t < 0 || t >= NT || !native || PyTypeNum_ISFLEXIBLE(t) || PyTypeNum_ISDATETIME(t)) {
        PyErr_SetString(PyExc_ValueError, "Native: not a builtin native-order number dtype");
        return -1;
    }
    return t;
}

/* the slot for two dtypes, made (empty) when missing; NULL with an error set */
static Slot *slot_for(Native *self, PyObject *in_dtype, PyObject *out_dtype)
{
    int tin = type_number(in_dtype), tout = tin < 0 ? -1 : type_number(out_dtype);
    if (tout < 0)
        return NULL;
    if (self->slot[tin][tout] == NULL) {
        self->slot[tin][tout] = PyMem_Calloc(1, sizeof(Slot));
        if (self->slot[tin][tout] == NULL)
            return (Slot *)PyErr_NoMemory();
    }
    return self->slot[tin][tout];
}

static kernel_fn address_of(PyObject *cfunc, PyObject *keep_list)
{
    PyObject *address = PyObject_GetAttrString(cfunc, "address");
    if (address == NULL)
        return NULL;
    unsigned long long value = PyLong_AsUnsignedLongLong(address);
    Py_DECREF(address);
    if (PyErr_Occurred())
        return NULL;
    if (value == 0) {
        PyErr_SetString(PyExc_ValueError, "Native: a kernel at address 0");
        return NULL;
    }
    if (PyList_Append(keep_list, cfunc) < 0) /* its code lives as long as this object */
        return NULL;
    return (kernel_fn)(uintptr_t)value;
}

PyDoc_STRVAR(add_doc, "add(in_dtype, out_dtype, serial, parallel, constants, fresh, "
             "stream=None)\n\n"
             "The kernels (numba cfuncs) for these dtypes: the serial one below parallel_min "
             "elements, and to mid_max the one the chooser decided (see add_plan; parallel "
             "or stream None: none yet, or the one given before; stream True: the op streams, "
             "its kernel to come, so the calls that can stream decline until then; False: "
             "no call streams here); with these "
             "constants (floats, at most 8). fresh: write a new output of out_dtype when out "
             "is None.");

static PyObject *native_add(Native *self, PyObject *args)
{
    PyObject *in_dtype, *out_dtype, *serial, *parallel, *constants, *stream = Py_None;
    int fresh;
    if (!PyArg_ParseTuple(args, "OOOOOp|O", &in_dtype, &out_dtype, &serial, &parallel,
                          &constants, &fresh, &stream))
        return NULL;
    PyObject *seq = PySequence_Fast(constants, "Native.add: constants must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    double c[MAXC] = {0};
    for (Py_ssize_t i = 0; i < k && i < MAXC; i++) {
        c[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (c[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (k > MAXC) {
        PyErr_SetString(PyExc_ValueError, "Native.add: more than 8 constants");
        return NULL;
    }
    Slot *slot = slot_for(self, in_dtype, out_dtype);
    kernel_fn fn = slot == NULL ? NULL : address_of(serial, self->keep);
    if (fn == NULL)
        return NULL;
    if (parallel != Py_None) {
        kernel_fn par = address_of(parallel, self->keep);
        if (par == NULL)
            return NULL;
        slot->par = par;
    }
    if (stream == Py_True || stream == Py_False) {
        slot->may_stream = stream == Py_True;
    } else if (stream != Py_None) {
        kernel_fn str = address_of(stream, self->keep);
        if (str == NULL)
            return NULL;
        slot->str = str;
        slot->may_stream = 1;
    }
    memcpy(slot->c, c, sizeof(c));
    slot->fn = fn;
    if (fresh)
        self->fresh[type_number(in_dtype)] = (signed char)type_number(out_dtype);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(add_plan_doc, "add_plan(in_dtype, out_dtype, size, decision, decide, record, "
             "stream=False)\n\n"
             "The chooser's live Decision (adaptive.Decision: variant, left, seconds, "
             "calls) for the calls of size class size (n.bit_length()); decide(n) -> "
             "(variant, timed) makes the next one when no call is left, and record(n, "
             "variant, seconds) takes a timed call's time (None, None: the Python path "
             "decides). stream: the plan and decide of the calls that can stream.");

static PyObject *native_add_plan(Native *self, PyObject *args)
{
    PyObject *in_dtype, *out_dtype, *plan, *decide = Py_None, *record = Py_None;
    int size, stream = 0;
    if (decision_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Native.add_plan: configure() first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOiO!|OOp", &in_dtype, &out_dtype, &size, decision_type, &plan,
                          &decide, &record, &stream))
        return NULL;
    if (size < 0 || size >= SIZES) {
        PyErr_SetString(PyExc_ValueError, "Native.add_plan: bad size class");
        return NULL;
    }
    if ((decide == Py_None) != (record == Py_None)
        || (decide != Py_None && (!PyCallable_Check(decide) || !PyCallable_Check(record)))) {
        PyErr_SetString(PyExc_TypeError, "Native.add_plan: decide and record: two callables, "
                        "or None");
        return NULL;
    }
    Slot *slot = slot_for(self, in_dtype, out_dtype);
    if (slot == NULL)
        return NULL;
    Py_XSETREF(*(stream ? &slot->splans[size] : &slot->plans[size]), Py_NewRef(plan));
    Py_XSETREF(*(stream ? &slot->sdecide : &slot->decide),
               decide == Py_None ? NULL : Py_NewRef(decide));
    Py_XSETREF(slot->record, record == Py_None ? NULL : Py_NewRef(record));
    Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"add", (PyCFunction)native_add, METH_VARARGS, add_doc},
    {"add_plan", (PyCFunction)native_add_plan, METH_VARARGS, add_plan_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NativeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chokepoint._native.Native",
    .tp_basicsize = sizeof(Native),
    .tp_dealloc = (destructor)native_dealloc,
    .tp_vectorcall_offset = offsetof(Native, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Native(kind, mid_max, tag=None): a public function's common call, in C (see "
              "native.py).",
    .tp_methods = native_methods,
    .tp_new = native_new,
};

/* where the object slots named in names sit in instances of type (offsets), or -1 with an
 * error set: a renamed slot fails here, at configure, instead of being misread */
static int slot_offsets(PyObject *type, const char *const *names, int k, Py_ssize_t *offsets)
{
    for (int i = 0; i < k; i++) {
        PyObject *descr = PyObject_GetAttrString(type, names[i]);
        if (descr == NULL)
            return -1;
        int member = Py_TYPE(descr) == &PyMemberDescr_Type;
        if (member) {
            PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
            member = def->type == T_OBJECT_EX;
            offsets[i] = def->offset;
        }
        Py_DECREF(descr);
        if (!member) {
            PyErr_Format(PyExc_TypeError, "configure: %s is not an object slot", names[i]);
            return -1;
        }
    }
    return 0;
}

static PyObject *configure(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *var, *dict, *key, *numba, *mask, *decision;
    if (!PyArg_ParseTuple(args, "O!O!UO!O!O!", &PyContextVar_Type, &var, &PyDict_Type, &dict,
                          &key, &PyModule_Type, &numba, &PyType_Type, &mask, &PyType_Type,
                          &decision))
        return NULL;
    /* everything checked before anything changes: a failed call leaves the old state */
    Py_ssize_t masks[3], decisions[4];
    const char *const mask_slots[] = {"_bits", "_shape", "_at_zero"};
    const char *const decision_slots[] = {"variant", "left", "seconds", "calls"};
    if (slot_offsets(mask, mask_slots, 3, masks) < 0
        || slot_offsets(decision, decision_slots, 4, decisions) < 0)
        return NULL;
    int has = PyDict_Contains(dict, key);
    if (has <= 0) {
        if (has == 0)
            PyErr_Format(PyExc_KeyError, "configure: no %R in the backend's globals", key);
        return NULL;
    }
    bits_at = masks[0];
    shape_at = masks[1];
    at_zero_at = masks[2];
    variant_at = decisions[0];
    left_at = decisions[1];
    seconds_at = decisions[2];
    calls_at = decisions[3];
    Py_XSETREF(mask_type, (PyTypeObject *)Py_NewRef(mask));
    Py_XSETREF(decision_type, (PyTypeObject *)Py_NewRef(decision));
    Py_XSETREF(engine_var, Py_NewRef(var));
    Py_XSETREF(backend_dict, Py_NewRef(dict));
    Py_XSETREF(default_key, Py_NewRef(key));
    Py_XSETREF(numba_engine, Py_NewRef(numba));
    Py_RETURN_NONE;
}

static PyObject *set_launch(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *min_bytes;
    Py_ssize_t min;
    int maps, free;
    if (!PyArg_ParseTuple(args, "nOpp", &min, &min_bytes, &maps, &free))
        return NULL;
    /* any integer, as Python compares it: a negative one as 0 (every call that can streams),
     * one past npy_intp as never */
    PyObject *index = PyNumber_Index(min_bytes);
    if (index == NULL)
        return NULL;
    int overflow = 0;
    long long bytes = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (bytes == -1 && PyErr_Occurred())
        return NULL;
    parallel_min = min < 0 ? 0 : min;
    stream_min = overflow > 0 || bytes > NPY_MAX_INTP ? NPY_MAX_INTP
        : overflow < 0 || bytes < 0 ? 0 : (npy_intp)bytes;
    stream_maps = maps;
    lock_free = free;
    Py_RETURN_NONE;
}

static PyObject *set_enabled(PyObject *module, PyObject *flag)
{
    (void)module;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    PyObject *was = enabled ? Py_True : Py_False;
    enabled = on;
    return Py_NewRef(was);
}

static PyObject *set_period_max(PyObject *module, PyObject *seconds)
{
    (void)module;
    double value = PyFloat_AsDouble(seconds);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(value > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "period_max must be a positive number of seconds");
        return NULL;
    }
    double was = period_max;
    period_max = value;
    return PyFloat_FromDouble(was);
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(engine_var, backend_dict, default_key, numba_engine, mask_type, "
     "decision_type): how to tell that numba's engine is in use (the ContextVar, else "
     "backend_dict[default_key]), and the types of the masks and of the chooser's "
     "decisions, whose slots are read by name."},
    {"set_launch", set_launch, METH_VARARGS,
     "set_launch(parallel_min, stream_min_bytes, stream_maps, lock_free): the launcher's "
     "settings (engine_numba.Settings): the serial kernel below parallel_min elements, maps "
     "may stream from stream_min_bytes of arrays where stream_maps, parallel kernels only "
     "where lock_free."},
    {"set_enabled", set_enabled, METH_O,
     "set_enabled(flag) -> the previous flag: whether Native objects take any call."},
    {"set_period_max", set_period_max, METH_O,
     "set_period_max(seconds) -> the previous value: a plan's period ends once its calls "
     "have taken this long (adaptive.PERIOD_MAX)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "The public functions' common call in C.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    import_array();
    if (PyType_Ready(&NativeType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObject(m, "Native", Py_NewRef((PyObject *)&NativeType)) < 0
        || PyModule_AddIntConstant(m, "MAP1", MAP1) < 0
        || PyModule_AddIntConstant(m, "MAP2", MAP2) < 0
        || PyModule_AddIntConstant(m, "MASK_FORWARD", MASK_FORWARD) < 0
        || PyModule_AddIntConstant(m, "MASK_BACKWARD", MASK_BACKWARD) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
