/* nwaku's call sequences through zerokit v2.0.2's C interface (librln, stateless build),
 * linked once against zerokit's own library and once against Canopy's (librln/):
 *
 *   harness golden FIXTURE          deterministic functions: outputs must be byte-identical
 *   harness prove FIXTURE OUT       witness -> proof -> 290 bytes, as nwaku publishes (and the
 *                                   partial path: OUT.partial)
 *   harness check FIXTURE PROOF     nwaku's receive path on a proof from either library, then
 *                                   tampered copies: ok/err must match between the libraries
 *   harness bench FIXTURE N         per-message work and start-up, timed
 *
 * The fixture (written by the Rust test from a Canopy tree) is one hex string per line: secret,
 * user message limit, message id, 20 path elements, the path index (20 bytes), the root, the
 * signal, the epoch, the RLN identifier, then older roots of the window (any number).
 * Everything the library returns is freed, so a leak checker sees a clean run. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "rln.h"

#define DEPTH 20
#define MAX_LINES 128

static void die(const char *what) {
    fprintf(stderr, "harness: %s\n", what);
    exit(2);
}

/* ---- fixture ------------------------------------------------------------------------------ */

typedef struct {
    uint8_t *data;
    size_t len;
} bytes_t;

static bytes_t lines[MAX_LINES];
static size_t n_lines;

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void load_fixture(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open fixture");
    char buf[4096];
    while (n_lines < MAX_LINES && fgets(buf, sizeof buf, f)) {
        size_t n = strcspn(buf, "\r\n");
        if (n % 2) die("odd hex line");
        bytes_t b = {malloc(n / 2 + 1), n / 2};
        for (size_t i = 0; i < n / 2; i++) {
            int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
            if (hi < 0 || lo < 0) die("bad hex");
            b.data[i] = (uint8_t)(hi * 16 + lo);
        }
        lines[n_lines++] = b;
    }
    fclose(f);
    if (n_lines < 3 + DEPTH + 5) die("short fixture");
}

static void free_fixture(void) {
    for (size_t i = 0; i < n_lines; i++) free(lines[i].data);
    n_lines = 0;
}

enum { L_SECRET = 0, L_LIMIT, L_MSG_ID, L_PATH, L_INDEX = L_PATH + DEPTH, L_ROOT, L_SIGNAL, L_EPOCH,
       L_RLN_ID, L_OLDER };

static Vec_uint8_t view(const uint8_t *data, size_t len) {
    /* A borrowed view, as nwaku's toVecUint8: never passed to ffi_vec_u8_free. */
    Vec_uint8_t v = {(uint8_t *)data, len, len};
    return v;
}

static Vec_uint8_t view_line(size_t i) { return view(lines[i].data, lines[i].len); }

/* ---- printing ----------------------------------------------------------------------------- */

static void print_hex(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
}

/* Prints and frees an error string. */
static void print_err(Vec_uint8_t err) {
    printf("err %.*s\n", (int)err.len, (const char *)err.ptr);
    ffi_c_string_free(err);
}

static void print_cfr(const char *label, const CFr_t *c) {
    Vec_uint8_t b = ffi_cfr_to_bytes_le(c);
    printf("%s ", label);
    print_hex(b.ptr, b.len);
    printf("\n");
    ffi_vec_u8_free(b);
}

/* Takes and frees a CFr. */
static void print_cfr_owned(const char *label, CFr_t *c) {
    if (!c) die("null CFr");
    print_cfr(label, c);
    ffi_cfr_free(c);
}

static CFr_t *cfr_of(const uint8_t *p, size_t n) {
    Vec_uint8_t v = view(p, n);
    CResult_CFr_ptr_Vec_uint8_t r = ffi_bytes_le_to_cfr(&v);
    if (!r.ok) {
        print_err(r.err);
        die("fixture value is not a field element");
    }
    return r.ok;
}

static CFr_t *cfr_line(size_t i) { return cfr_of(lines[i].data, lines[i].len); }

/* ---- nwaku's building blocks -------------------------------------------------------------- */

/* externalNullifier = Poseidon(H(epoch), H(rlnIdentifier)), H = hash_to_field_le. */
static CFr_t *external_nullifier(void) {
    Vec_uint8_t e = view_line(L_EPOCH), id = view_line(L_RLN_ID);
    CFr_t *ef = ffi_hash_to_field_le(&e), *idf = ffi_hash_to_field_le(&id);
    CFr_t *en = ffi_poseidon_hash_pair(ef, idf);
    ffi_cfr_free(ef);
    ffi_cfr_free(idf);
    return en;
}

static Vec_CFr_t path_vec(size_t depth) {
    Vec_CFr_t v = ffi_vec_cfr_new(depth);
    for (size_t i = 0; i < depth; i++) {
        CFr_t *c = cfr_line(L_PATH + (i % DEPTH));
        ffi_vec_cfr_push(&v, c);
        ffi_cfr_free(c);
    }
    return v;
}

/* The window of acceptable roots: the current one and the older ones of the fixture. */
static Vec_CFr_t root_window(void) {
    Vec_CFr_t v = ffi_vec_cfr_new(n_lines - L_ROOT);
    for (size_t i = L_ROOT; i < n_lines; i++) {
        if (i == L_SIGNAL) i = L_OLDER;
        if (i >= n_lines) break;
        CFr_t *c = cfr_line(i);
        ffi_vec_cfr_push(&v, c);
        ffi_cfr_free(c);
    }
    return v;
}

/* A witness with the fixture's member and `depth` path elements; NULL (error printed) if
 * refused. `limit`/`msg_id` override the fixture's when not NULL. */
static FFI_RLNWitnessInput_t *witness(size_t depth, size_t index_len, const CFr_t *limit,
                                      const CFr_t *msg_id, int quiet) {
    CFr_t *secret = cfr_line(L_SECRET);
    CFr_t *lim = limit ? NULL : cfr_line(L_LIMIT);
    CFr_t *mid = msg_id ? NULL : cfr_line(L_MSG_ID);
    Vec_uint8_t sig = view_line(L_SIGNAL);
    CFr_t *x = ffi_hash_to_field_le(&sig);
    CFr_t *en = external_nullifier();
    Vec_CFr_t path = path_vec(depth);
    uint8_t index[2 * DEPTH] = {0};
    memcpy(index, lines[L_INDEX].data, DEPTH);
    Vec_uint8_t idx = view(index, index_len);
    CResult_FFI_RLNWitnessInput_ptr_Vec_uint8_t r = ffi_rln_witness_input_new(
        secret, limit ? limit : lim, msg_id ? msg_id : mid, &path, &idx, x, en);
    ffi_vec_cfr_free(path);
    ffi_cfr_free(secret);
    if (lim) ffi_cfr_free(lim);
    if (mid) ffi_cfr_free(mid);
    ffi_cfr_free(x);
    ffi_cfr_free(en);
    if (!r.ok) {
        if (quiet) ffi_c_string_free(r.err);
        else print_err(r.err);
        return NULL;
    }
    return r.ok;
}

static FFI_RLN_t *rln_new(void) {
    CResult_FFI_RLN_ptr_Vec_uint8_t r = ffi_rln_new();
    if (!r.ok) {
        print_err(r.err);
        die("ffi_rln_new failed");
    }
    return r.ok;
}

/* nwaku's publish path: witness, proof, 290 bytes. The caller frees the bytes. */
static Vec_uint8_t prove_bytes(FFI_RLN_t *rln) {
    FFI_RLNWitnessInput_t *w = witness(DEPTH, DEPTH, NULL, NULL, 0);
    if (!w) die("witness refused");
    CResult_FFI_RLNProof_ptr_Vec_uint8_t p = ffi_generate_rln_proof(&rln, &w);
    ffi_rln_witness_input_free(w);
    if (!p.ok) {
        print_err(p.err);
        die("proof refused");
    }
    CResult_Vec_uint8_Vec_uint8_t b = ffi_rln_proof_to_bytes_le(&p.ok);
    ffi_rln_proof_free(p.ok);
    if (b.err.ptr) {
        print_err(b.err);
        die("to_bytes refused");
    }
    return b.ok;
}

/* A member's partial proof from the fixture's secret, limit and path (nwaku's two-step path). */
static FFI_RLNPartialProof_t *partial_proof(FFI_RLN_t *rln) {
    CFr_t *secret = cfr_line(L_SECRET), *limit = cfr_line(L_LIMIT);
    Vec_CFr_t path = path_vec(DEPTH);
    Vec_uint8_t idx = view(lines[L_INDEX].data, DEPTH);
    CResult_FFI_RLNPartialWitnessInput_ptr_Vec_uint8_t pw =
        ffi_rln_partial_witness_input_new(secret, limit, &path, &idx);
    ffi_vec_cfr_free(path);
    ffi_cfr_free(secret);
    ffi_cfr_free(limit);
    if (!pw.ok) { print_err(pw.err); die("partial witness refused"); }
    CResult_FFI_RLNPartialProof_ptr_Vec_uint8_t pp = ffi_generate_partial_zk_proof(&rln, &pw.ok);
    ffi_rln_partial_witness_input_free(pw.ok);
    if (!pp.ok) { print_err(pp.err); die("partial proof refused"); }
    return pp.ok;
}

/* nwaku's receive path: the proof rebuilt from its parts (ffi_rln_proof_new), then
 * ffi_verify_with_roots. Prints "ok" or "err <message>"; returns 1 when verified. */
static int check_parts(FFI_RLN_t *rln, const uint8_t *groth16, size_t groth16_len,
                       const uint8_t *values /* root, en, x, y, nullifier */, Vec_CFr_t *roots,
                       const CFr_t *x) {
    CFr_t *v[5];
    for (int i = 0; i < 5; i++) {
        Vec_uint8_t b = view(values + 32 * i, 32);
        CResult_CFr_ptr_Vec_uint8_t r = ffi_bytes_le_to_cfr(&b);
        if (!r.ok) {
            print_err(r.err);
            for (int j = 0; j < i; j++) ffi_cfr_free(v[j]);
            return 0;
        }
        v[i] = r.ok;
    }
    Vec_uint8_t g = view(groth16, groth16_len);
    CResult_FFI_RLNProof_ptr_Vec_uint8_t p = ffi_rln_proof_new(&g, v[0], v[1], v[2], v[3], v[4]);
    for (int i = 0; i < 5; i++) ffi_cfr_free(v[i]);
    if (!p.ok) {
        print_err(p.err);
        return 0;
    }
    CBoolResult_t res = ffi_verify_with_roots(&rln, &p.ok, roots, x);
    ffi_rln_proof_free(p.ok);
    if (res.err.ptr) {
        printf("%s ", res.ok ? "true" : "false");
        print_err(res.err);
        return 0;
    }
    printf("%s\n", res.ok ? "ok" : "false (no message)");
    return res.ok;
}

/* ---- golden: deterministic functions ------------------------------------------------------ */

static void golden(void) {
    /* hash_to_field_le */
    uint8_t buf[256];
    for (int i = 0; i < 256; i++) buf[i] = (uint8_t)(i * 7 + 3);
    size_t lens[] = {0, 1, 31, 32, 33, 64, 255, 256};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        Vec_uint8_t v = view(buf, lens[i]);
        char label[64];
        snprintf(label, sizeof label, "hash_to_field_le[%zu]", lens[i]);
        print_cfr_owned(label, ffi_hash_to_field_le(&v));
    }
    Vec_uint8_t sig = view_line(L_SIGNAL);
    print_cfr_owned("hash_to_field_le[signal]", ffi_hash_to_field_le(&sig));

    /* field elements from bytes: canonical, edge, non-canonical, short, long */
    static const uint8_t r_minus_1[32] = {
        0x00, 0x00, 0x00, 0xf0, 0x93, 0xf5, 0xe1, 0x43, 0x91, 0x70, 0xb9, 0x79, 0x48, 0xe8, 0x33, 0x28,
        0x5d, 0x58, 0x81, 0x81, 0xb6, 0x45, 0x50, 0xb8, 0x29, 0xa0, 0x31, 0xe1, 0x72, 0x4e, 0x64, 0x30};
    uint8_t r_exact[32], ones[33];
    memcpy(r_exact, r_minus_1, 32);
    r_exact[0] = 0x01;
    memset(ones, 0xff, sizeof ones);
    struct { const char *label; const uint8_t *p; size_t n; } cases[] = {
        {"cfr[zero]", buf + 200, 0}, {"cfr[r-1]", r_minus_1, 32}, {"cfr[r]", r_exact, 32},
        {"cfr[2^256-1]", ones, 32}, {"cfr[31 bytes]", ones, 31}, {"cfr[33 bytes]", r_minus_1, 32},
        {"cfr[buf]", buf, 32}, {"cfr[buf+1, 40 bytes]", buf + 1, 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Vec_uint8_t v = view(cases[i].p, cases[i].n);
        CResult_CFr_ptr_Vec_uint8_t r = ffi_bytes_le_to_cfr(&v);
        printf("%s: ", cases[i].label);
        if (r.ok) print_cfr_owned("ok", r.ok);
        else print_err(r.err);
    }
    print_cfr_owned("cfr_zero", ffi_cfr_zero());

    /* Poseidon pairs */
    CFr_t *secret = cfr_line(L_SECRET), *limit = cfr_line(L_LIMIT), *zero = ffi_cfr_zero();
    print_cfr_owned("poseidon(0,0)", ffi_poseidon_hash_pair(zero, zero));
    print_cfr_owned("poseidon(secret,limit)", ffi_poseidon_hash_pair(secret, limit));
    print_cfr_owned("external_nullifier", external_nullifier());

    /* vectors */
    Vec_CFr_t v = ffi_vec_cfr_new(0);
    ffi_vec_cfr_push(&v, secret);
    ffi_vec_cfr_push(&v, limit);
    ffi_vec_cfr_push(&v, zero);
    printf("vec len %zu\n", ffi_vec_cfr_len(&v));
    for (size_t i = 0; i < 4; i++) {
        const CFr_t *c = ffi_vec_cfr_get(&v, i);
        if (c) print_cfr("vec get", c);
        else printf("vec get %zu null\n", i);
    }
    ffi_vec_cfr_free(v);

    /* keys (seeded: deterministic) */
    const char *seeds[] = {"", "seed", "nwaku member 42"};
    for (size_t s = 0; s < 3; s++) {
        Vec_uint8_t sv = view((const uint8_t *)seeds[s], strlen(seeds[s]));
        Vec_CFr_t k = ffi_seeded_extended_key_gen(&sv);
        printf("seeded_extended_key_gen[%s] len %zu\n", seeds[s], k.len);
        for (size_t i = 0; i < k.len; i++) print_cfr("  key", ffi_vec_cfr_get(&k, i));
        ffi_vec_cfr_free(k);
    }
    Vec_CFr_t k = ffi_extended_key_gen();
    printf("extended_key_gen len %zu\n", k.len);
    ffi_vec_cfr_free(k);

    /* slashing */
    CResult_CFr_ptr_Vec_uint8_t id = ffi_compute_id_secret(secret, limit, zero, secret);
    printf("compute_id_secret: ");
    if (id.ok) print_cfr_owned("ok", id.ok); else print_err(id.err);
    id = ffi_compute_id_secret(secret, limit, secret, zero);
    printf("compute_id_secret[same x]: ");
    if (id.ok) print_cfr_owned("ok", id.ok); else print_err(id.err);

    /* witness checks */
    FFI_RLNWitnessInput_t *w;
    printf("witness[limit 0]: ");
    if ((w = witness(DEPTH, DEPTH, zero, NULL, 0))) { printf("ok\n"); ffi_rln_witness_input_free(w); }
    printf("witness[19 path, 20 index]: ");
    if ((w = witness(DEPTH - 1, DEPTH, NULL, NULL, 0))) { printf("ok\n"); ffi_rln_witness_input_free(w); }
    printf("witness[message id = limit]: ");
    if ((w = witness(DEPTH, DEPTH, NULL, limit, 0))) { printf("ok\n"); ffi_rln_witness_input_free(w); }
    printf("witness[fixture]: ");
    if ((w = witness(DEPTH, DEPTH, NULL, NULL, 0))) { printf("ok\n"); ffi_rln_witness_input_free(w); }

    FFI_RLN_t *rln = rln_new();
    /* a witness of the wrong depth is refused by the prover */
    printf("prove[depth 19]: ");
    if ((w = witness(DEPTH - 1, DEPTH - 1, NULL, NULL, 0))) {
        CResult_FFI_RLNProof_ptr_Vec_uint8_t p = ffi_generate_rln_proof(&rln, &w);
        if (p.ok) { printf("ok\n"); ffi_rln_proof_free(p.ok); } else print_err(p.err);
        ffi_rln_witness_input_free(w);
    }

    /* partial proofs are deterministic: the same bytes from both libraries */
    FFI_RLNPartialProof_t *pp = partial_proof(rln);
    CResult_Vec_uint8_Vec_uint8_t pb = ffi_rln_partial_proof_to_bytes_le(&pp);
    ffi_rln_partial_proof_free(pp);
    printf("partial proof %zu bytes ", pb.ok.len);
    print_hex(pb.ok.ptr, pb.ok.len);
    printf("\n");
    /* its bytes decode, and cut or extended they do not */
    for (int cut = 0; cut < 3; cut++) {
        size_t n = cut == 0 ? pb.ok.len : cut == 1 ? pb.ok.len - 1 : 1;
        Vec_uint8_t v2 = view(pb.ok.ptr, n);
        CResult_FFI_RLNPartialProof_ptr_Vec_uint8_t d = ffi_bytes_le_to_rln_partial_proof(&v2);
        printf("partial from %zu bytes: ", n);
        if (d.ok) { printf("ok\n"); ffi_rln_partial_proof_free(d.ok); } else print_err(d.err);
    }
    ffi_vec_u8_free(pb.ok);
    ffi_rln_free(rln);
    ffi_cfr_free(secret);
    ffi_cfr_free(limit);
    ffi_cfr_free(zero);
}

/* ---- prove -------------------------------------------------------------------------------- */

static void write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) die("cannot write output");
    fclose(f);
}

static void prove(const char *out) {
    FFI_RLN_t *rln = rln_new();
    Vec_uint8_t b = prove_bytes(rln);
    write_file(out, b.ptr, b.len);
    printf("proof %zu bytes\n", b.len);
    ffi_vec_u8_free(b);

    /* the two-step path: partial from the member's inputs, finished with the message's,
     * through its bytes, as a node that stored it would */
    FFI_RLNPartialProof_t *pp = partial_proof(rln);
    CResult_Vec_uint8_Vec_uint8_t pb = ffi_rln_partial_proof_to_bytes_le(&pp);
    ffi_rln_partial_proof_free(pp);
    CResult_FFI_RLNPartialProof_ptr_Vec_uint8_t back = ffi_bytes_le_to_rln_partial_proof(&pb.ok);
    ffi_vec_u8_free(pb.ok);
    if (!back.ok) { print_err(back.err); die("partial bytes refused"); }
    FFI_RLNWitnessInput_t *w = witness(DEPTH, DEPTH, NULL, NULL, 0);
    CResult_FFI_RLNProof_ptr_Vec_uint8_t p = ffi_finish_rln_proof(&rln, &back.ok, &w);
    ffi_rln_witness_input_free(w);
    ffi_rln_partial_proof_free(back.ok);
    if (!p.ok) { print_err(p.err); die("finish refused"); }
    CResult_Vec_uint8_Vec_uint8_t fb = ffi_rln_proof_to_bytes_le(&p.ok);
    ffi_rln_proof_free(p.ok);
    char path2[4096];
    snprintf(path2, sizeof path2, "%s.partial", out);
    write_file(path2, fb.ok.ptr, fb.ok.len);
    printf("finished proof %zu bytes\n", fb.ok.len);
    ffi_vec_u8_free(fb.ok);
    ffi_rln_free(rln);
}

/* ---- check: a given proof, its layout, and tampered copies ---------------------------------- */

static bytes_t read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open proof");
    bytes_t b = {malloc(4096), 0};
    b.len = fread(b.data, 1, 4096, f);
    fclose(f);
    return b;
}

static void check(const char *proof_path) {
    bytes_t proof = read_file(proof_path);
    FFI_RLN_t *rln = rln_new();
    Vec_CFr_t roots = root_window();
    Vec_uint8_t sig = view_line(L_SIGNAL);
    CFr_t *x = ffi_hash_to_field_le(&sig);

    /* layout: decode the 290 bytes, read the values back, encode again */
    Vec_uint8_t pv = view(proof.data, proof.len);
    CResult_FFI_RLNProof_ptr_Vec_uint8_t d = ffi_bytes_le_to_rln_proof(&pv);
    if (!d.ok) { print_err(d.err); die("proof bytes refused"); }
    FFI_RLNProofValues_t *vals = ffi_rln_proof_get_values(&d.ok);
    print_cfr_owned("root", ffi_rln_proof_values_get_root(&vals));
    print_cfr_owned("x", ffi_rln_proof_values_get_x(&vals));
    print_cfr_owned("external_nullifier", ffi_rln_proof_values_get_external_nullifier(&vals));
    CResult_CFr_ptr_Vec_uint8_t y = ffi_rln_proof_values_get_y(&vals);
    CResult_CFr_ptr_Vec_uint8_t nul = ffi_rln_proof_values_get_nullifier(&vals);
    if (!y.ok || !nul.ok) die("values refused");
    print_cfr_owned("y", y.ok);
    print_cfr_owned("nullifier", nul.ok);
    ffi_rln_proof_values_free(vals);
    CResult_Vec_uint8_Vec_uint8_t again = ffi_rln_proof_to_bytes_le(&d.ok);
    printf("re-encoded: %s\n",
           again.ok.len == proof.len && !memcmp(again.ok.ptr, proof.data, proof.len) ? "same" : "DIFFERENT");
    ffi_vec_u8_free(again.ok);
    printf("verify decoded: ");
    CBoolResult_t res = ffi_verify_with_roots(&rln, &d.ok, &roots, x);
    if (res.err.ptr) print_err(res.err); else printf("%s\n", res.ok ? "ok" : "false");
    Vec_CFr_t none = ffi_vec_cfr_new(0);
    printf("verify decoded, no roots: ");
    res = ffi_verify_with_roots(&rln, &d.ok, &none, x);
    if (res.err.ptr) print_err(res.err); else printf("%s\n", res.ok ? "ok" : "false");
    ffi_vec_cfr_free(none);
    ffi_rln_proof_free(d.ok);

    /* nwaku's receive path on the untouched proof, then tampered copies */
    const uint8_t *g = proof.data + 1, *values = proof.data + 130;
    printf("receive: ");
    check_parts(rln, g, 128, values, &roots, x);

    uint8_t t[290];
    struct { const char *label; size_t at; uint8_t xor_mask; } flips[] = {
        {"A bit", 1 + 3, 0x01}, {"A sign", 1 + 31, 0x80}, {"B bit", 1 + 40, 0x01},
        {"C bit", 1 + 100, 0x04}, {"C sign", 1 + 127, 0x80},
        {"root", 130 + 0, 0x01}, {"external nullifier", 130 + 32, 0x01}, {"x", 130 + 64, 0x01},
        {"y", 130 + 96, 0x01}, {"nullifier", 130 + 128, 0x01}, {"root high byte", 130 + 31, 0xf0},
    };
    for (size_t i = 0; i < sizeof flips / sizeof *flips; i++) {
        memcpy(t, proof.data, 290);
        t[flips[i].at] ^= flips[i].xor_mask;
        printf("tampered %s: ", flips[i].label);
        check_parts(rln, t + 1, 128, t + 130, &roots, x);
    }
    /* a signal that is not the message's */
    uint8_t other[] = "another message";
    Vec_uint8_t ov = view(other, sizeof other - 1);
    CFr_t *x2 = ffi_hash_to_field_le(&ov);
    printf("other signal: ");
    check_parts(rln, g, 128, values, &roots, x2);
    ffi_cfr_free(x2);
    /* a window without the proof's root */
    Vec_CFr_t stale = ffi_vec_cfr_new(1);
    CFr_t *zero = ffi_cfr_zero();
    ffi_vec_cfr_push(&stale, zero);
    ffi_cfr_free(zero);
    printf("root not in window: ");
    check_parts(rln, g, 128, values, &stale, x);
    ffi_vec_cfr_free(stale);
    /* wrong lengths of the Groth16 part */
    printf("groth16 127 bytes: ");
    check_parts(rln, g, 127, values, &roots, x);
    printf("groth16 129 bytes: ");
    memcpy(t, proof.data, 290);
    check_parts(rln, t + 1, 129, values, &roots, x);
    /* whole-proof decoding: truncated, extended, versions */
    uint8_t longer[291];
    memcpy(longer, proof.data, 290);
    longer[290] = 0;
    struct { const char *label; const uint8_t *p; size_t n; int version; } whole[] = {
        {"bytes 0", proof.data, 0, -1}, {"bytes 1", proof.data, 1, -1},
        {"bytes 129", proof.data, 129, -1}, {"bytes 289", proof.data, 289, -1},
        {"bytes 291", longer, 291, -1}, {"version 1", proof.data, 290, 1},
        {"version 2", proof.data, 290, 2}, {"values version 1", proof.data, 290, 101},
    };
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++) {
        memcpy(t, whole[i].p, whole[i].n < 290 ? whole[i].n : 290);
        const uint8_t *p = whole[i].n > 290 ? whole[i].p : t;
        if (whole[i].version >= 0 && whole[i].version < 100) t[0] = (uint8_t)whole[i].version;
        if (whole[i].version == 101) t[129] = 1;
        Vec_uint8_t wv = view(p, whole[i].n);
        CResult_FFI_RLNProof_ptr_Vec_uint8_t r = ffi_bytes_le_to_rln_proof(&wv);
        printf("decode %s: ", whole[i].label);
        if (r.ok) { printf("ok\n"); ffi_rln_proof_free(r.ok); } else print_err(r.err);
    }
    ffi_vec_cfr_free(roots);
    ffi_cfr_free(x);
    ffi_rln_free(rln);
    free(proof.data);
}

/* ---- bench -------------------------------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long max_rss_kib(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* settle: seconds to wait after the first proof, so that what ffi_rln_new left to the
 * background (Canopy's tables) is done before the timed proofs, and the peak RSS counts it. */
static void bench(int n, int settle) {
    long rss0 = max_rss_kib();
    double t0 = now();
    FFI_RLN_t *rln = rln_new();
    double startup = now() - t0;
    /* the first proof: whatever ffi_rln_new left to do (Canopy's tables) is done by its end */
    Vec_uint8_t first = prove_bytes(rln);
    double first_proof = now() - t0 - startup;
    ffi_vec_u8_free(first);
    long rss1 = max_rss_kib();
    if (settle > 0) sleep((unsigned)settle);
    Vec_CFr_t roots = root_window();
    Vec_uint8_t sig = view_line(L_SIGNAL);
    double *prove_t = calloc(n, sizeof *prove_t), *verify_t = calloc(n, sizeof *verify_t);
    for (int i = 0; i < n; i++) {
        double a = now();
        Vec_uint8_t b = prove_bytes(rln); /* witness + proof + to-bytes */
        double m = now();
        CFr_t *x = ffi_hash_to_field_le(&sig); /* nwaku hashes the signal per message */
        int ok = check_parts(rln, b.ptr + 1, 128, b.ptr + 130, &roots, x);
        double e = now();
        ffi_cfr_free(x);
        ffi_vec_u8_free(b);
        if (!ok) die("a fresh proof did not verify");
        prove_t[i] = m - a;
        verify_t[i] = e - m;
    }
    qsort(prove_t, n, sizeof *prove_t, cmp_double);
    qsort(verify_t, n, sizeof *verify_t, cmp_double);
    printf("BENCH startup_s %.4f first_proof_s %.4f startup_rss_mib %.1f peak_rss_added_mib %.1f "
           "total_rss_mib %.1f prove_median_s %.5f prove_min_s %.5f verify_median_s %.6f "
           "verify_min_s %.6f n %d\n",
           startup, first_proof, (rss1 - rss0) / 1024.0, (max_rss_kib() - rss0) / 1024.0,
           max_rss_kib() / 1024.0, prove_t[n / 2], prove_t[0], verify_t[n / 2], verify_t[0], n);
    free(prove_t);
    free(verify_t);
    ffi_vec_cfr_free(roots);
    ffi_rln_free(rln);
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage: harness golden|prove|check|bench FIXTURE [ARG]");
    setvbuf(stdout, NULL, _IOLBF, 0);
    load_fixture(argv[2]);
    if (!strcmp(argv[1], "golden")) golden();
    else if (!strcmp(argv[1], "prove") && argc > 3) prove(argv[3]);
    else if (!strcmp(argv[1], "check") && argc > 3) check(argv[3]);
    else if (!strcmp(argv[1], "bench") && argc > 3)
        bench(atoi(argv[3]) > 0 ? atoi(argv[3]) : 1, argc > 4 ? atoi(argv[4]) : 0);
    else die("unknown mode");
    free_fixture();
    return 0;
}
