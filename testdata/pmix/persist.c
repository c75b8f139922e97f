/* persist: PMIx_Publish with PMIX_PERSISTENCE, and how long each name
 * lives under the server's name service.
 *
 * "persist pub PREFIX" (2 ranks): rank 0 publishes PREFIX-fr (FIRST_READ),
 * PREFIX-pr (PROC), PREFIX-ap (APP) and PREFIX-ix (INDEF); rank 1 finds
 * PREFIX-pr and PREFIX-ap while rank 0 lives; rank 0 ends; rank 1 looks
 * PREFIX-pr up again until it is gone (at most 10 s) and finds PREFIX-ap
 * still there (its job lives on).
 * "persist get PREFIX" (any rank count, best 1; run after the pub job has
 * ended): looks PREFIX-fr up twice, then PREFIX-ap, PREFIX-pr, PREFIX-ix.
 * Every lookup is without PMIX_WAIT, so none can hang. Prints one line per
 * lookup ("LABEL KEY: VALUE" or "LABEL KEY: STATUS", KEY without the
 * prefix); exits 0 unless a call failed unexpectedly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pmix.h>

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL %s: %s\n", what, PMIx_Error_string(rc));
    return 1;
}

/* lookup prints what a lookup of PREFIX-suffix finds, after label and
 * without the prefix (nothing with no label), and returns its status. */
static pmix_status_t lookup(const char *label, const char *prefix, const char *suffix)
{
    pmix_pdata_t pd;
    pmix_status_t rc;
    char key[PMIX_MAX_KEYLEN + 1];

    snprintf(key, sizeof(key), "%s-%s", prefix, suffix);
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, key);
    rc = PMIx_Lookup(&pd, 1, NULL, 0);
    if (NULL == label) {
        /* asked only for the status */
    } else if (PMIX_SUCCESS == rc && PMIX_STRING == pd.value.type) {
        printf("%s %s: %s\n", label, suffix, pd.value.data.string);
    } else if (PMIX_SUCCESS == rc) {
        printf("%s %s: type %s\n", label, suffix, PMIx_Data_type_string(pd.value.type));
    } else {
        printf("%s %s: %s\n", label, suffix, PMIx_Error_string(rc));
    }
    PMIX_PDATA_DESTRUCT(&pd);
    return rc;
}

static int publish(const char *prefix, const char *suffix, pmix_persistence_t persist)
{
    pmix_info_t info[2];
    pmix_status_t rc;
    char key[PMIX_MAX_KEYLEN + 1], val[32];

    snprintf(key, sizeof(key), "%s-%s", prefix, suffix);
    snprintf(val, sizeof(val), "value-%s", suffix);
    PMIX_INFO_LOAD(&info[0], key, val, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_PERSISTENCE, &persist, PMIX_PERSIST);
    rc = PMIx_Publish(info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return PMIX_SUCCESS == rc ? 0 : fail(key, rc);
}

static int pub(const pmix_proc_t *me, const char *prefix)
{
    pmix_status_t rc;
    struct timespec pause = {0, 100 * 1000 * 1000};
    int i;

    if (0 == me->rank &&
        (publish(prefix, "fr", PMIX_PERSIST_FIRST_READ) || publish(prefix, "pr", PMIX_PERSIST_PROC) ||
         publish(prefix, "ap", PMIX_PERSIST_APP) || publish(prefix, "ix", PMIX_PERSIST_INDEF))) {
        return 1;
    }
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0))) {
        return fail("PMIx_Fence", rc);
    }
    if (1 == me->rank) {
        lookup("alive", prefix, "pr");
        lookup("alive", prefix, "ap");
        fflush(stdout);
    }
    if (PMIX_SUCCESS != (rc = PMIx_Fence(NULL, 0, NULL, 0))) {
        return fail("PMIx_Fence", rc);
    }
    if (1 == me->rank) {
        /* rank 0 ends now: its PROC name goes once the runtime has seen it
         * end, which this rank cannot tell from here, so it asks again */
        for (i = 0; i < 100 && PMIX_SUCCESS == lookup(NULL, prefix, "pr"); i++) {
            nanosleep(&pause, NULL);
        }
        lookup("ended", prefix, "pr");
        lookup("ended", prefix, "ap");
        fflush(stdout);
    }
    rc = PMIx_Finalize(NULL, 0);
    return PMIX_SUCCESS == rc ? 0 : fail("PMIx_Finalize", rc);
}

static int get(const char *prefix)
{
    pmix_status_t rc;

    lookup("1", prefix, "fr");
    lookup("2", prefix, "fr");
    lookup("3", prefix, "ap");
    lookup("4", prefix, "pr");
    lookup("5", prefix, "ix");
    fflush(stdout);
    rc = PMIx_Finalize(NULL, 0);
    return PMIX_SUCCESS == rc ? 0 : fail("PMIx_Finalize", rc);
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;

    if (argc != 3 || (0 != strcmp(argv[1], "pub") && 0 != strcmp(argv[1], "get"))) {
        fprintf(stderr, "usage: %s pub|get PREFIX\n", argv[0]);
        return 2;
    }
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        return fail("PMIx_Init", rc);
    }
    return 0 == strcmp(argv[1], "pub") ? pub(&me, argv[2]) : get(argv[2]);
}
