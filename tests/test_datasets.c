/* SHA-256 against FIPS 180-4 test vectors and the wikitext-2 checks. */
#include <stdlib.h>
#include <string.h>

#include "lmq_datasets.h"
#include "testutil.h"

int main(void)
{
    char hex[65];
    lmq_sha256_hex("abc", 3, hex);
    T_CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "abc: %s", hex);
    lmq_sha256_hex("", 0, hex);
    T_CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "empty: %s", hex);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    lmq_sha256_hex(two, strlen(two), hex);
    T_CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "448 bits: %s", hex);
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    lmq_sha256_hex(mil, 1000000, hex);
    T_CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "million a: %s", hex);
    free(mil);

    /* a wrong file named wiki.test.raw is refused with a clear message */
    const char *fake = t_tmp("wiki.test.raw");
    t_write_all(fake, "not wikitext\n", 13);
    char *text;
    size_t len;
    T_CHECK(lmq_text_load(fake, 0, &text, &len) == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "SHA-256"), "mismatch refused");
    T_CHECK(lmq_text_load(fake, 1, &text, &len) == LMQ_OK && len == 13, "allowed with override");
    free(text);
    char found[4096];
    T_CHECK(lmq_wikitext2_find(t_tmpdir(), NULL, found, sizeof found) == LMQ_OK && !strcmp(found, fake), "find in dir");
    T_CHECK(lmq_wikitext2_find("/nonexistent", NULL, found, sizeof found) == LMQ_ERR_NOT_FOUND, "missing");
    /* the real file, when present, passes */
    const char *real = t_shared("data/wikitext-2-raw/wiki.test.raw");
    if (t_exists(real)) {
        T_CHECK(lmq_text_load(real, 0, &text, &len) == LMQ_OK && len == 1290590, "canonical file: %s", lmq_last_error());
        free(text);
    }
    return t_finish();
}
