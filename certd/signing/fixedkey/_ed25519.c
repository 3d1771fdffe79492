/* Strict Ed25519 verification under one public key known in advance (the audit's log key).
 *
 * An audit checks about a million signatures by the same key. A general verifier computes
 * [s]B - [h]A with about 253 point doublings, because A is new to it every time. Here A is
 * decoded once and a table of its multiples is built once (``prepare``), as for the base
 * point B, so [s]B - [h]A is about 128 table additions and 4 doublings (``verify``).
 *
 * What ``verify`` accepts is what libsodium's crypto_sign_verify_detached accepts, for a key
 * ``prepare`` takes:
 *   - ``prepare`` takes only a key whose y is canonical (below p), that decodes to a point,
 *     is not the identity and lies in the prime-order subgroup ([L]A is the identity); every
 *     such key passes libsodium's key checks (canonical, not of small order). Other keys get
 *     a ValueError, and the caller verifies with the library instead.
 *   - s must be canonical (s < L);
 *   - R is compared as bytes with the canonical encoding of R' = [s]B - [h]A (cofactorless,
 *     as libsodium), so a non-canonical R never matches;
 *   - R may not be of small order (libsodium's blocklist). With A and B in the prime-order
 *     subgroup, R' is too, and the one point of small order there is the identity, whose
 *     encoding is refused here; no other small-order R can equal the encoding of R'.
 * h = SHA-512(R || A || M) mod L is computed by the caller (certd.signing.ed25519).
 *
 * Field elements are five 51-bit limbs (radix 2^51) with 128-bit products; points use
 * extended twisted Edwards coordinates (Hisil, Wong, Carter, Dawson 2008: add-2008-hwcd-3
 * and dbl-2008-hwcd with a = -1), tables hold affine points as (y+x, y-x, 2dxy). Nothing here
 * needs constant time: every input is public. tests/unit/signing/test_fixed_key_verify.py
 * checks this file against libsodium on honest, mutated and forged signatures.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

typedef struct {
    uint64_t v[5];
} fe;

#define MASK51 ((((uint64_t)1) << 51) - 1)

/* Limbs below 2^51 + 2^9 (weakly reduced) in, out: one carry pass. */
static void fe_carry(fe *h)
{
    uint64_t *v = h->v;
    v[1] += v[0] >> 51;
    v[0] &= MASK51;
    v[2] += v[1] >> 51;
    v[1] &= MASK51;
    v[3] += v[2] >> 51;
    v[2] &= MASK51;
    v[4] += v[3] >> 51;
    v[3] &= MASK51;
    v[0] += 19 * (v[4] >> 51);
    v[4] &= MASK51;
}

static void fe_set_small(fe *h, uint64_t x)
{
    memset(h, 0, sizeof(*h));
    h->v[0] = x;
}

static void fe_add(fe *h, const fe *a, const fe *b)
{
    for (int i = 0; i < 5; i++)
        h->v[i] = a->v[i] + b->v[i];
    fe_carry(h);
}

/* a + 4p - b: no limb goes negative for weakly reduced b. */
static void fe_sub(fe *h, const fe *a, const fe *b)
{
    static const uint64_t four_p[5] = {
        (((uint64_t)1) << 53) - 76, (((uint64_t)1) << 53) - 4, (((uint64_t)1) << 53) - 4,
        (((uint64_t)1) << 53) - 4,  (((uint64_t)1) << 53) - 4,
    };
    for (int i = 0; i < 5; i++)
        h->v[i] = a->v[i] + four_p[i] - b->v[i];
    fe_carry(h);
}

static void fe_neg(fe *h, const fe *a)
{
    fe zero;
    fe_set_small(&zero, 0);
    fe_sub(h, &zero, a);
}

/* The five 128-bit column sums of a product, carried into weakly reduced limbs. */
static void fe_reduce_wide(fe *h, u128 r0, u128 r1, u128 r2, u128 r3, u128 r4)
{
    r1 += (uint64_t)(r0 >> 51);
    r2 += (uint64_t)(r1 >> 51);
    r3 += (uint64_t)(r2 >> 51);
    r4 += (uint64_t)(r3 >> 51);
    u128 top = r4 >> 51;
    u128 low = ((uint64_t)r0 & MASK51) + top * 19;
    h->v[0] = (uint64_t)low & MASK51;
    h->v[1] = ((uint64_t)r1 & MASK51) + (uint64_t)(low >> 51);
    h->v[2] = (uint64_t)r2 & MASK51;
    h->v[3] = (uint64_t)r3 & MASK51;
    h->v[4] = (uint64_t)r4 & MASK51;
}

static void fe_mul(fe *h, const fe *a, const fe *b)
{
    const uint64_t a0 = a->v[0], a1 = a->v[1], a2 = a->v[2], a3 = a->v[3], a4 = a->v[4];
    const uint64_t b0 = b->v[0], b1 = b->v[1], b2 = b->v[2], b3 = b->v[3], b4 = b->v[4];
    const uint64_t b1_19 = 19 * b1, b2_19 = 19 * b2, b3_19 = 19 * b3, b4_19 = 19 * b4;
    u128 r0 = (u128)a0 * b0 + (u128)a1 * b4_19 + (u128)a2 * b3_19 + (u128)a3 * b2_19 +
              (u128)a4 * b1_19;
    u128 r1 = (u128)a0 * b1 + (u128)a1 * b0 + (u128)a2 * b4_19 + (u128)a3 * b3_19 +
              (u128)a4 * b2_19;
    u128 r2 = (u128)a0 * b2 + (u128)a1 * b1 + (u128)a2 * b0 + (u128)a3 * b4_19 +
              (u128)a4 * b3_19;
    u128 r3 = (u128)a0 * b3 + (u128)a1 * b2 + (u128)a2 * b1 + (u128)a3 * b0 +
              (u128)a4 * b4_19;
    u128 r4 = (u128)a0 * b4 + (u128)a1 * b3 + (u128)a2 * b2 + (u128)a3 * b1 + (u128)a4 * b0;
    fe_reduce_wide(h, r0, r1, r2, r3, r4);
}

static void fe_sq(fe *h, const fe *a)
{
    const uint64_t a0 = a->v[0], a1 = a->v[1], a2 = a->v[2], a3 = a->v[3], a4 = a->v[4];
    const uint64_t d0 = 2 * a0, d1 = 2 * a1, a3_19 = 19 * a3, a4_19 = 19 * a4;
    u128 r0 = (u128)a0 * a0 + (u128)d1 * a4_19 + (u128)(2 * a2) * a3_19;
    u128 r1 = (u128)d0 * a1 + (u128)(2 * a2) * a4_19 + (u128)a3 * a3_19;
    u128 r2 = (u128)d0 * a2 + (u128)a1 * a1 + (u128)(2 * a3) * a4_19;
    u128 r3 = (u128)d0 * a3 + (u128)d1 * a2 + (u128)a4 * a4_19;
    u128 r4 = (u128)d0 * a4 + (u128)d1 * a3 + (u128)a2 * a2;
    fe_reduce_wide(h, r0, r1, r2, r3, r4);
}

static void fe_sqn(fe *h, const fe *a, int n)
{
    fe_sq(h, a);
    for (int i = 1; i < n; i++)
        fe_sq(h, h);
}

static void fe_frombytes(fe *h, const uint8_t s[32])
{
    uint64_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = 0;
        for (int j = 7; j >= 0; j--)
            w[i] = (w[i] << 8) | s[8 * i + j];
    }
    h->v[0] = w[0] & MASK51;
    h->v[1] = ((w[0] >> 51) | (w[1] << 13)) & MASK51;
    h->v[2] = ((w[1] >> 38) | (w[2] << 26)) & MASK51;
    h->v[3] = ((w[2] >> 25) | (w[3] << 39)) & MASK51;
    h->v[4] = (w[3] >> 12) & MASK51; /* bit 255 (the sign of x in a point) dropped */
}

/* The canonical encoding: the value reduced below p, 32 bytes little-endian. */
static void fe_tobytes(uint8_t s[32], const fe *a)
{
    fe t = *a;
    fe_carry(&t);
    fe_carry(&t); /* now below 2^255 + 38, so q below is 1 exactly when t >= p */
    uint64_t q = (t.v[0] + 19) >> 51;
    q = (t.v[1] + q) >> 51;
    q = (t.v[2] + q) >> 51;
    q = (t.v[3] + q) >> 51;
    q = (t.v[4] + q) >> 51;
    t.v[0] += 19 * q; /* t + 19q - 2^255 q: the 2^255 goes with the last mask */
    t.v[1] += t.v[0] >> 51;
    t.v[0] &= MASK51;
    t.v[2] += t.v[1] >> 51;
    t.v[1] &= MASK51;
    t.v[3] += t.v[2] >> 51;
    t.v[2] &= MASK51;
    t.v[4] += t.v[3] >> 51;
    t.v[3] &= MASK51;
    t.v[4] &= MASK51;
    uint64_t w[4] = {
        t.v[0] | (t.v[1] << 51),
        (t.v[1] >> 13) | (t.v[2] << 38),
        (t.v[2] >> 26) | (t.v[3] << 25),
        (t.v[3] >> 39) | (t.v[4] << 12),
    };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            s[8 * i + j] = (uint8_t)(w[i] >> (8 * j));
}

static int fe_iszero(const fe *a)
{
    uint8_t s[32];
    fe_tobytes(s, a);
    uint8_t any = 0;
    for (int i = 0; i < 32; i++)
        any |= s[i];
    return any == 0;
}

static int fe_equal(const fe *a, const fe *b)
{
    fe d;
    fe_sub(&d, a, b);
    return fe_iszero(&d);
}

static int fe_isnegative(const fe *a)
{
    uint8_t s[32];
    fe_tobytes(s, a);
    return s[0] & 1;
}

/* z^(2^250 - 1), and z^11 in *z11: the common start of inversion and square root. */
static void fe_pow2_250_1(fe *out, fe *z11, const fe *z)
{
    fe t0, t1, t2;
    fe_sq(&t0, z);          /* z^2 */
    fe_sqn(&t1, &t0, 2);    /* z^8 */
    fe_mul(&t1, z, &t1);    /* z^9 */
    fe_mul(z11, &t0, &t1);  /* z^11 */
    fe_sq(&t0, z11);        /* z^22 */
    fe_mul(&t0, &t1, &t0);  /* z^31 = z^(2^5 - 1) */
    fe_sqn(&t1, &t0, 5);
    fe_mul(&t0, &t1, &t0);  /* z^(2^10 - 1) */
    fe_sqn(&t1, &t0, 10);
    fe_mul(&t1, &t1, &t0);  /* z^(2^20 - 1) */
    fe_sqn(&t2, &t1, 20);
    fe_mul(&t1, &t2, &t1);  /* z^(2^40 - 1) */
    fe_sqn(&t1, &t1, 10);
    fe_mul(&t0, &t1, &t0);  /* z^(2^50 - 1) */
    fe_sqn(&t1, &t0, 50);
    fe_mul(&t1, &t1, &t0);  /* z^(2^100 - 1) */
    fe_sqn(&t2, &t1, 100);
    fe_mul(&t1, &t2, &t1);  /* z^(2^200 - 1) */
    fe_sqn(&t1, &t1, 50);
    fe_mul(out, &t1, &t0);  /* z^(2^250 - 1) */
}

/* z^(p - 2) = z^(2^255 - 21) = 1/z (0 for 0). */
static void fe_invert(fe *out, const fe *z)
{
    fe t, z11;
    fe_pow2_250_1(&t, &z11, z);
    fe_sqn(&t, &t, 5);     /* z^(2^255 - 32) */
    fe_mul(out, &t, &z11); /* z^(2^255 - 21) */
}

/* z^((p - 5) / 8) = z^(2^252 - 3), for square roots. */
static void fe_pow22523(fe *out, const fe *z)
{
    fe t, z11;
    fe_pow2_250_1(&t, &z11, z);
    fe_sqn(&t, &t, 2);  /* z^(2^252 - 4) */
    fe_mul(out, &t, z); /* z^(2^252 - 3) */
}

static fe D, D2, SQRTM1; /* d = -121665/121666, 2d, sqrt(-1): set at import */

typedef struct {
    fe X, Y, Z, T; /* x = X/Z, y = Y/Z, xy = T/Z */
} ge_p3;

typedef struct {
    fe X, Y, Z, T; /* completed: x = X/Z, y = Y/T */
} ge_p1p1;

typedef struct {
    fe ypx, ymx, xy2d; /* an affine point as y + x, y - x, 2dxy */
} ge_precomp;

typedef struct {
    fe ypx, ymx, Z, T2d; /* a projective point ready to be added */
} ge_cached;

static void ge_identity(ge_p3 *p)
{
    fe_set_small(&p->X, 0);
    fe_set_small(&p->Y, 1);
    fe_set_small(&p->Z, 1);
    fe_set_small(&p->T, 0);
}

static int ge_is_identity(const ge_p3 *p)
{
    return fe_iszero(&p->X) && fe_equal(&p->Y, &p->Z);
}

static void ge_p1p1_to_p3(ge_p3 *r, const ge_p1p1 *p)
{
    fe_mul(&r->X, &p->X, &p->T);
    fe_mul(&r->Y, &p->Y, &p->Z);
    fe_mul(&r->Z, &p->Z, &p->T);
    fe_mul(&r->T, &p->X, &p->Y);
}

static void ge_to_cached(ge_cached *c, const ge_p3 *p)
{
    fe_add(&c->ypx, &p->Y, &p->X);
    fe_sub(&c->ymx, &p->Y, &p->X);
    c->Z = p->Z;
    fe_mul(&c->T2d, &p->T, &D2);
}

static void ge_to_precomp(ge_precomp *c, const ge_p3 *p)
{
    fe zi, x, y;
    fe_invert(&zi, &p->Z);
    fe_mul(&x, &p->X, &zi);
    fe_mul(&y, &p->Y, &zi);
    fe_add(&c->ypx, &y, &x);
    fe_sub(&c->ymx, &y, &x);
    fe_mul(&c->xy2d, &x, &y);
    fe_mul(&c->xy2d, &c->xy2d, &D2);
}

/* add-2008-hwcd-3: A = (Y1-X1)(Y2-X2), B = (Y1+X1)(Y2+X2), C = T1 2d T2, D = 2 Z1 Z2; the
 * result (E, H, G, F) = (B-A, B+A, D+C, D-C) as (X, Y, Z, T) of the completed point. */
static void ge_add(ge_p1p1 *r, const ge_p3 *p, const ge_cached *q)
{
    fe a, b, c, d;
    fe_sub(&a, &p->Y, &p->X);
    fe_mul(&a, &a, &q->ymx);
    fe_add(&b, &p->Y, &p->X);
    fe_mul(&b, &b, &q->ypx);
    fe_mul(&c, &p->T, &q->T2d);
    fe_mul(&d, &p->Z, &q->Z);
    fe_add(&d, &d, &d);
    fe_sub(&r->X, &b, &a);
    fe_add(&r->Y, &b, &a);
    fe_add(&r->Z, &d, &c);
    fe_sub(&r->T, &d, &c);
}

/* The same with an affine q (Z2 = 1); ``negate`` adds -q = (-x, y): y+x and y-x swap and
 * 2dxy changes sign. */
static void ge_madd(ge_p1p1 *r, const ge_p3 *p, const ge_precomp *q, int negate)
{
    fe a, b, c, d;
    fe_sub(&a, &p->Y, &p->X);
    fe_mul(&a, &a, negate ? &q->ypx : &q->ymx);
    fe_add(&b, &p->Y, &p->X);
    fe_mul(&b, &b, negate ? &q->ymx : &q->ypx);
    fe_mul(&c, &p->T, &q->xy2d);
    fe_add(&d, &p->Z, &p->Z);
    fe_sub(&r->X, &b, &a);
    fe_add(&r->Y, &b, &a);
    if (negate) {
        fe_sub(&r->Z, &d, &c);
        fe_add(&r->T, &d, &c);
    } else {
        fe_add(&r->Z, &d, &c);
        fe_sub(&r->T, &d, &c);
    }
}

/* dbl-2008-hwcd with a = -1: A = X^2, B = Y^2, C = 2Z^2, E = (X+Y)^2 - A - B, G = B - A,
 * F = G - C, H = -A - B; the result (E, H, G, F) as above. */
static void ge_dbl(ge_p1p1 *r, const ge_p3 *p)
{
    fe a, b, c, e, s;
    fe_sq(&a, &p->X);
    fe_sq(&b, &p->Y);
    fe_sq(&c, &p->Z);
    fe_add(&c, &c, &c);
    fe_add(&s, &p->X, &p->Y);
    fe_sq(&s, &s);
    fe_sub(&e, &s, &a);
    fe_sub(&r->X, &e, &b); /* E */
    fe_sub(&r->Z, &b, &a); /* G */
    fe_sub(&r->T, &r->Z, &c); /* F */
    fe_add(&s, &a, &b);
    fe_neg(&r->Y, &s); /* H */
}

static void ge_double_p3(ge_p3 *p)
{
    ge_p1p1 t;
    ge_dbl(&t, p);
    ge_p1p1_to_p3(p, &t);
}

/* RFC 8032 5.1.3, y canonical checked by the caller where it matters: 0 if s is no point. */
static int ge_frombytes(ge_p3 *p, const uint8_t s[32])
{
    fe y, u, v, v3, vxx, x, y2, one, check;
    fe_set_small(&one, 1);
    fe_frombytes(&y, s);
    fe_sq(&y2, &y);
    fe_sub(&u, &y2, &one);   /* u = y^2 - 1 */
    fe_mul(&v, &y2, &D);
    fe_add(&v, &v, &one);    /* v = d y^2 + 1 */
    fe_sq(&v3, &v);
    fe_mul(&v3, &v3, &v);    /* v^3 */
    fe_sq(&x, &v3);
    fe_mul(&x, &x, &v);
    fe_mul(&x, &x, &u);      /* u v^7 */
    fe_pow22523(&x, &x);     /* (u v^7)^((p-5)/8) */
    fe_mul(&x, &x, &v3);
    fe_mul(&x, &x, &u);      /* x = u v^3 (u v^7)^((p-5)/8) */
    fe_sq(&vxx, &x);
    fe_mul(&vxx, &vxx, &v);
    if (!fe_equal(&vxx, &u)) {
        fe_neg(&check, &u);
        if (!fe_equal(&vxx, &check))
            return 0;
        fe_mul(&x, &x, &SQRTM1);
    }
    int sign = s[31] >> 7;
    if (fe_iszero(&x) && sign)
        return 0;
    if (fe_isnegative(&x) != sign)
        fe_neg(&x, &x);
    p->X = x;
    p->Y = y;
    fe_set_small(&p->Z, 1);
    fe_mul(&p->T, &x, &y);
    return 1;
}

static void ge_tobytes(uint8_t s[32], const ge_p3 *p)
{
    fe zi, x, y;
    fe_invert(&zi, &p->Z);
    fe_mul(&x, &p->X, &zi);
    fe_mul(&y, &p->Y, &zi);
    fe_tobytes(s, &y);
    s[31] ^= (uint8_t)(fe_isnegative(&x) << 7);
}

/* table[j][k] = (k + 1) 256^j P, for the signed radix-16 digits of a scalar. */
typedef ge_precomp table_t[32][8];

static void build_table(table_t table, const ge_p3 *point)
{
    ge_p3 base = *point, cur;
    ge_cached step;
    ge_p1p1 t;
    for (int j = 0; j < 32; j++) {
        ge_to_cached(&step, &base);
        cur = base;
        ge_to_precomp(&table[j][0], &cur);
        for (int k = 1; k < 8; k++) {
            ge_add(&t, &cur, &step);
            ge_p1p1_to_p3(&cur, &t);
            ge_to_precomp(&table[j][k], &cur);
        }
        for (int i = 0; i < 8; i++)
            ge_double_p3(&base);
    }
}

/* L = 2^252 + 27742317777372353535851937790883648493, little-endian. */
static const uint8_t L_BYTES[32] = {
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
};

static int sc_below_L(const uint8_t s[32])
{
    for (int i = 31; i >= 0; i--) {
        if (s[i] != L_BYTES[i])
            return s[i] < L_BYTES[i];
    }
    return 0;
}

/* 64 digits e[i] in [-8, 8] with a = sum e[i] 16^i, for a < 2^255. */
static void sc_signed_radix16(int8_t e[64], const uint8_t a[32])
{
    int carry = 0;
    for (int i = 0; i < 32; i++) {
        e[2 * i] = (int8_t)(a[i] & 15);
        e[2 * i + 1] = (int8_t)(a[i] >> 4);
    }
    for (int i = 0; i < 63; i++) {
        int d = e[i] + carry;
        carry = (d + 8) >> 4;
        e[i] = (int8_t)(d - (carry << 4));
    }
    e[63] = (int8_t)(e[63] + carry);
}

/* acc += e * row[.] (or -= with ``negate``) for a radix-16 digit e, row[k] = (k + 1) Q. */
static void add_digit(ge_p3 *acc, const ge_precomp row[8], int e, int negate)
{
    if (e == 0)
        return;
    ge_p1p1 t;
    if (e < 0) {
        e = -e;
        negate = !negate;
    }
    ge_madd(&t, acc, &row[e - 1], negate);
    ge_p1p1_to_p3(acc, &t);
}

static table_t BASE_TABLE;

static const uint8_t IDENTITY_BYTES[32] = {1};

/* [L]P by double-and-add (once per key). */
static void ge_mul_L(ge_p3 *out, const ge_p3 *p)
{
    ge_cached c;
    ge_p1p1 t;
    ge_to_cached(&c, p);
    ge_identity(out);
    for (int bit = 252; bit >= 0; bit--) {
        ge_double_p3(out);
        if ((L_BYTES[bit / 8] >> (bit % 8)) & 1) {
            ge_add(&t, out, &c);
            ge_p1p1_to_p3(out, &t);
        }
    }
}

static PyObject *prepare(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer key;
    if (!PyArg_ParseTuple(args, "y*:prepare", &key))
        return NULL;
    uint8_t a[32], canonical[32];
    int ok = key.len == 32;
    if (ok)
        memcpy(a, key.buf, 32);
    PyBuffer_Release(&key);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected a 32-byte Ed25519 public key");
        return NULL;
    }
    fe y;
    fe_frombytes(&y, a);
    fe_tobytes(canonical, &y);
    canonical[31] |= a[31] & 0x80;
    if (memcmp(canonical, a, 32) != 0) {
        PyErr_SetString(PyExc_ValueError, "the key's y is not canonical (not below p)");
        return NULL;
    }
    ge_p3 point, check;
    if (!ge_frombytes(&point, a)) {
        PyErr_SetString(PyExc_ValueError, "the key is not a point of the curve");
        return NULL;
    }
    ge_mul_L(&check, &point);
    if (ge_is_identity(&point) || !ge_is_identity(&check)) {
        PyErr_SetString(PyExc_ValueError, "the key is not in the prime-order subgroup");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, sizeof(table_t));
    if (out == NULL)
        return NULL;
    build_table(*(table_t *)PyBytes_AS_STRING(out), &point);
    return out;
}

static PyObject *verify(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer table, r, s, h;
    if (!PyArg_ParseTuple(args, "y*y*y*y*:verify", &table, &r, &s, &h))
        return NULL;
    int sizes_ok = table.len == (Py_ssize_t)sizeof(table_t) && r.len == 32 && s.len == 32 &&
                   h.len == 32;
    int ok = 0;
    if (sizes_ok && sc_below_L(s.buf) && sc_below_L(h.buf) &&
        memcmp(r.buf, IDENTITY_BYTES, 32) != 0) {
        const ge_precomp(*key_table)[8] = (const ge_precomp(*)[8])table.buf;
        int8_t es[64], eh[64];
        sc_signed_radix16(es, s.buf);
        sc_signed_radix16(eh, h.buf);
        ge_p3 acc;
        ge_identity(&acc);
        for (int i = 1; i < 64; i += 2) { /* [s]B - [h]A, odd digits, then times 16 */
            add_digit(&acc, BASE_TABLE[i / 2], es[i], 0);
            add_digit(&acc, key_table[i / 2], eh[i], 1);
        }
        for (int i = 0; i < 4; i++)
            ge_double_p3(&acc);
        for (int i = 0; i < 64; i += 2) {
            add_digit(&acc, BASE_TABLE[i / 2], es[i], 0);
            add_digit(&acc, key_table[i / 2], eh[i], 1);
        }
        uint8_t encoded[32];
        ge_tobytes(encoded, &acc);
        ok = memcmp(encoded, r.buf, 32) == 0;
    }
    PyBuffer_Release(&table);
    PyBuffer_Release(&r);
    PyBuffer_Release(&s);
    PyBuffer_Release(&h);
    if (!sizes_ok) {
        PyErr_SetString(PyExc_ValueError,
                        "expected prepare()'s table and 32 bytes each of R, s and h");
        return NULL;
    }
    return PyBool_FromLong(ok);
}

static PyMethodDef METHODS[] = {
    {"prepare", prepare, METH_VARARGS,
     "prepare(public_key) -> table: the key's table for verify(); ValueError for a key that "
     "is not canonical, not a point, or not in the prime-order subgroup."},
    {"verify", verify, METH_VARARGS,
     "verify(table, R, s, h) -> bool: R == encode([s]B - [h]A), s < L, R not the identity; "
     "h = SHA-512(R || A || M) mod L, 32 bytes little-endian."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_ed25519",
    "Strict Ed25519 verification under one public key with precomputed tables (see the C "
    "file's header).",
    -1, METHODS, NULL, NULL, NULL, NULL,
};

/* The base point: y = 4/5, x even. */
static const uint8_t BASE_BYTES[32] = {
    0x58, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
    0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
};

PyMODINIT_FUNC PyInit__ed25519(void)
{
    fe num, den, minus_one, two;
    fe_set_small(&num, 121665);
    fe_neg(&num, &num);
    fe_set_small(&den, 121666);
    fe_invert(&den, &den);
    fe_mul(&D, &num, &den);
    fe_add(&D2, &D, &D);
    fe_set_small(&two, 2); /* sqrt(-1) = 2^((p-1)/4) = (2^((p-5)/8))^2 * 2 */
    fe_pow22523(&SQRTM1, &two);
    fe_sq(&SQRTM1, &SQRTM1);
    fe_mul(&SQRTM1, &SQRTM1, &two);
    fe_set_small(&minus_one, 1);
    fe_neg(&minus_one, &minus_one);
    fe check;
    fe_sq(&check, &SQRTM1);
    ge_p3 base;
    if (!fe_equal(&check, &minus_one) || !ge_frombytes(&base, BASE_BYTES)) {
        PyErr_SetString(PyExc_ImportError, "_ed25519: the curve constants do not check");
        return NULL;
    }
    build_table(BASE_TABLE, &base);
    return PyModule_Create(&MODULE);
}
