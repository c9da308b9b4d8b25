/* The C ABI (sbsh.h), from C: sessions and what they keep (kept copies, environments,
 * idle implicit sessions), confinement, files beneath a session's root, background
 * processes and plans. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capi.h"

/* What a setup wrote, as sbsh_session_create_spec_output passes it. */
struct setup_seen {
  char out[256], err[256];
};

static void take_setup_output(void* user, int stream, const char* data, size_t len) {
  struct setup_seen* seen = user;
  char* to = stream == 1 ? seen->out : seen->err;
  size_t have = strlen(to);
  if (have + len < sizeof seen->out) memcpy(to + have, data, len);
}

void test_sessions(sbsh_conn* c) {
  note("sessions: create, list, show, restart, remove");
  const char* env[] = {"Z=zz"};
  const char* init[] = {"Y=from-init", "cd /"};
  CHECK(sbsh_session_create(c, "made", "/tmp", env, 1, init, 2, "on-failure") == SBSH_OK);
  CHECK(sbsh_session_create(c, "made", "/tmp", env, 1, init, 2, "on-failure") == SBSH_OK); /* same: no-op */
  CHECK(sbsh_session_create(c, "made", "/var", env, 1, init, 2, "on-failure") == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "session_exists") == 0);
  EXPECT_STDOUT(c, "made", "echo $Y $Z; pwd", "from-init zz\n/\n");

  char* json = NULL;
  CHECK(sbsh_sessions_json(c, &json) == SBSH_OK && json != NULL && json[0] == '[');
  CHECK(contains(json, "\"name\":\"made\"") && contains(json, "\"name\":\"c-api\""));
  CHECK(contains(json, "\"restart\":\"on-failure\""));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_session_show_json(c, "made", &json) == SBSH_OK);
  CHECK(contains(json, "\"init\":[\"Y=from-init\",\"cd /\"]") && contains(json, "\"env\":[\"Z=zz\"]"));
  CHECK(contains(json, "\"command\":\"echo $Y $Z; pwd\""));
  sbsh_free(json);

  const char* limits[] = {"nofile=48", "fsize=1M:2M"};
  CHECK(sbsh_session_create_limited(c, "capped", NULL, NULL, 0, NULL, 0, NULL, limits, 2) == SBSH_OK);
  EXPECT_STDOUT(c, "capped", "ulimit -n; ulimit -Sf; ulimit -Hf", "48\n1024\n2048\n");
  const char* bad[] = {"nofile=many"};
  CHECK(sbsh_session_create_limited(c, "capped2", NULL, NULL, 0, NULL, 0, NULL, bad, 1) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "bad_request") == 0 && contains(sbsh_last_error(c), "limit nofile"));

  /* A session made from a snapshot copy, through the versioned spec. */
  char src[sizeof dir + 16], copy[sizeof state_dir + 32], want[sizeof copy + 16];
  snprintf(src, sizeof src, "%s/snapsrc", dir);
  snprintf(copy, sizeof copy, "%s/snapshots/snap", state_dir);
  snprintf(want, sizeof want, "orig\n%s\n", copy);
  CHECK(mkdir(src, 0700) == 0);
  char path[sizeof src + 8];
  snprintf(path, sizeof path, "%s/f", src);
  FILE* f = fopen(path, "w");
  CHECK(f != NULL && fputs("orig\n", f) >= 0 && fclose(f) == 0);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = "snap";
  spec.snapshot = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  EXPECT_STDOUT(c, "snap", "cat f; pwd; echo changed > f", want);
  char line[16] = "";
  f = fopen(path, "r");
  CHECK(f != NULL && fgets(line, sizeof line, f) != NULL && strcmp(line, "orig\n") == 0);
  fclose(f);
  spec.version = 0;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "sbsh_session_spec_init"));
  CHECK(sbsh_session_remove(c, "snap") == SBSH_OK);
  CHECK(access(copy, F_OK) != 0 && errno == ENOENT);

  /* A session with a root: its shells start there with SBSH_ROOT; exec's cwd stays beneath it. */
  char real[4096], rooted[2 * sizeof real + 8];
  CHECK(realpath(src, real) != NULL);
  sbsh_session_spec_init(&spec);
  spec.name = "rooted";
  spec.root = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  snprintf(rooted, sizeof rooted, "%s %s\n", real, real);
  EXPECT_STDOUT(c, "rooted", "echo \"$(pwd) $SBSH_ROOT\"", rooted);
  {
    sbsh_exec_opts ro;
    sbsh_exec_opts_init(&ro);
    ro.session = "rooted";
    ro.cwd = "..";
    ro.command = "true";
    sbsh_result* rr = NULL;
    CHECK(sbsh_exec(c, &ro, &rr) == SBSH_ERR_REFUSED && rr == NULL);
    CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0 && contains(sbsh_last_error(c), "'..'"));
  }
  CHECK(sbsh_session_remove(c, "rooted") == SBSH_OK);

  /* A setup builds the session's environment (SBSH_ENV) before the call returns; a failed one
   * says why. */
  sbsh_session_spec_init(&spec);
  spec.name = "envd";
  spec.cwd = src;
  spec.setup = "echo built > \"$SBSH_ENV/mark\"; echo building; echo warned >&2";
  struct setup_seen seen;
  memset(&seen, 0, sizeof seen);
  CHECK(sbsh_session_create_spec_output(c, &spec, take_setup_output, &seen) == SBSH_OK);
  CHECK(strcmp(seen.out, "building\n") == 0 && strcmp(seen.err, "warned\n") == 0);
  EXPECT_STDOUT(c, "envd", "cat \"$SBSH_ENV/mark\"", "built\n");
  CHECK(sbsh_session_remove(c, "envd") == SBSH_OK);
  spec.name = "envbad";
  spec.setup = "echo cannot >&2; exit 5";
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "setup_failed") == 0 && contains(sbsh_last_error(c), "cannot"));

  EXPECT_STDOUT(c, "made", "W=set; echo $W", "set\n");
  CHECK(sbsh_session_restart(c, "made") == SBSH_OK);
  EXPECT_STDOUT(c, "made", "echo ${W:-gone} $Y", "gone from-init\n");

  /* A session that ended and is not restarted runs nothing, and its results say so. */
  CHECK(sbsh_session_create(c, "never", NULL, NULL, 0, NULL, 0, "never") == SBSH_OK);
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "never";
  sbsh_result* r = run(c, &o, "exit 0");
  if (r != NULL) {
    CHECK(sbsh_result_ran(r) == 1 && sbsh_result_shell_restarted(r) == 1);
    sbsh_result_free(r);
  }
  r = run(c, &o, "echo no");
  if (r != NULL) {
    CHECK(sbsh_result_ran(r) == 0 && sbsh_result_has_exit_code(r) == 0);
    CHECK(contains(sbsh_result_error(r), "restart"));
    sbsh_result_free(r);
  }
  CHECK(sbsh_session_remove(c, "never") == SBSH_OK);

  CHECK(sbsh_session_remove(c, "made") == SBSH_OK);
  json = NULL;
  CHECK(sbsh_sessions_json(c, &json) == SBSH_OK && !contains(json, "\"name\":\"made\""));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "made") == SBSH_ERR_NOT_FOUND);
}


/* The value of the first "key":"..." in a JSON text, into out ("" when there is none). */
static void json_str(const char* json, const char* key, char* out, size_t size) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\":\"", key);
  const char* p = json != NULL ? strstr(json, k) : NULL;
  const char* end = p != NULL ? strchr(p + strlen(k), '"') : NULL;
  out[0] = '\0';
  if (end != NULL) snprintf(out, size, "%.*s", (int)(end - p - strlen(k)), p + strlen(k));
}

/* What sessions leave behind, each through its own call: idle sessions made implicitly
 * (sbsh_session_prune), snapshot copies kept after their sessions (sbsh_kept_copies_*),
 * environments built by setups (sbsh_environment*), and a kept command's output
 * (sbsh_command_logs). */
void test_housekeeping(sbsh_conn* c) {
  note("housekeeping: prune, kept copies, environments, command logs");
  char* json = NULL;
  EXPECT_STDOUT(c, "implicit-one", "echo hi", "hi\n");
  CHECK(sbsh_session_create(c, "defined-one", "/tmp", NULL, 0, NULL, 0, NULL) == SBSH_OK);
  CHECK(sbsh_session_prune(c, 3600 * 1000, &json) == SBSH_OK && json != NULL && strcmp(json, "[]") == 0);
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_session_prune(c, 0, &json) == SBSH_OK && contains(json, "\"implicit-one\"") &&
        contains(json, "\"c-api\"") && !contains(json, "defined-one"));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_session_remove(c, "implicit-one") == SBSH_ERR_NOT_FOUND);
  CHECK(sbsh_session_remove(c, "defined-one") == SBSH_OK);
  CHECK(sbsh_session_prune(c, -1, NULL) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "idle_ms"));

  /* A copy kept after its session is listed with its size, then pruned. */
  char src[128], args[512];
  snprintf(src, sizeof src, "%s/keep-src", dir);
  CHECK(mkdir(src, 0755) == 0);
  snprintf(args, sizeof args, "%s/f", src);
  write_file(args, "kept\n");
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = "kc";
  spec.snapshot = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  CHECK(sbsh_session_remove_keep_copy(c, "env-less", NULL) == SBSH_ERR_NOT_FOUND);
  char* kept_at = NULL;
  CHECK(sbsh_session_remove_keep_copy(c, "kc", &kept_at) == SBSH_OK && kept_at != NULL);
  char kept[512] = "";
  if (CHECK(sbsh_kept_copies_json(c, &json) == SBSH_OK && contains(json, "\"session\":\"kc\"") &&
            contains(json, "\"size_bytes\":"))) {
    json_str(json, "path", kept, sizeof kept);
    CHECK(kept_at != NULL && strcmp(kept, kept_at) == 0);
    char kept_file[sizeof kept + 8];
    snprintf(kept_file, sizeof kept_file, "%s/f", kept);
    CHECK(access(kept_file, F_OK) == 0);
  }
  sbsh_free(kept_at);
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_kept_copies_prune(c, &json) == SBSH_OK && contains(json, "\"session\":\"kc\"") &&
        !contains(json, "size_bytes"));
  sbsh_free(json);
  json = NULL;
  CHECK(kept[0] != '\0' && access(kept, F_OK) != 0 && errno == ENOENT);
  CHECK(sbsh_kept_copies_json(c, &json) == SBSH_OK && strcmp(json, "[]") == 0);
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_kept_copies_json(c, NULL) == SBSH_ERR_INVALID);

  /* An environment is listed with the sessions that use it; removing it is refused while one
   * does; once none does, prune deletes it. */
  sbsh_session_spec_init(&spec);
  spec.name = "env-user";
  spec.cwd = src;
  spec.setup = "echo housekeeping > \"$SBSH_ENV/mark\"";
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  char hash[128] = "", path[512] = "";
  /* The entry of this setup: its hash and path come before its setup text. */
  if (CHECK(sbsh_environments_json(c, &json) == SBSH_OK && contains(json, "\"sessions\":[\"env-user\"]"))) {
    const char* at = strstr(json, "housekeeping");
    const char* start = at;
    while (start != NULL && start > json && *start != '{') --start;
    json_str(start, "hash", hash, sizeof hash);
    json_str(start, "path", path, sizeof path);
  }
  sbsh_free(json);
  json = NULL;
  CHECK(hash[0] != '\0' && path[0] != '\0');
  CHECK(sbsh_environment_remove(c, hash, 0) == SBSH_ERR_REFUSED && strcmp(sbsh_last_error_code(c), "env_in_use") == 0);
  CHECK(sbsh_session_remove(c, "env-user") == SBSH_OK);
  CHECK(sbsh_environments_prune(c, -2, 0, NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_environments_prune(c, -1, -5, NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_environments_prune(c, -1, 3600 * 1000, &json) == SBSH_OK && !contains(json, hash));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_environments_prune(c, -1, 0, &json) == SBSH_OK && contains(json, hash));
  sbsh_free(json);
  json = NULL;
  CHECK(access(path, F_OK) != 0 && errno == ENOENT);
  CHECK(sbsh_environment_remove(c, hash, 1) == SBSH_ERR_NOT_FOUND);
  CHECK(sbsh_environment_remove(c, NULL, 0) == SBSH_ERR_INVALID);

  /* A kept command's output, both streams or one, and its result. */
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "logs";
  o.keep = 1;
  sbsh_result* r = run(c, &o, "echo out; echo err >&2");
  if (r == NULL) return;
  uint64_t id = sbsh_result_command_id(r);
  sbsh_result_free(r);
  struct capture cap;
  memset(&cap, 0, sizeof cap);
  r = NULL;
  if (CHECK(sbsh_command_logs(c, id, 0, 0, -1, capture_output, &cap, &r) == SBSH_OK && r != NULL)) {
    CHECK_BYTES(cap.out, cap.out_len, "out\n", 4);
    CHECK_BYTES(cap.err, cap.err_len, "err\n", 4);
    CHECK(sbsh_result_running(r) == 0 && sbsh_result_exit_code(r) == 0 && sbsh_result_command_id(r) == id);
    CHECK(sbsh_result_stdout_bytes(r) == 4 && sbsh_result_stderr_bytes(r) == 4);
    sbsh_result_free(r);
  }
  /* From offsets: only what follows them. */
  memset(&cap, 0, sizeof cap);
  CHECK(sbsh_command_logs_since(c, id, 2, 4, 0, 0, -1, capture_output, &cap, NULL) == SBSH_OK);
  CHECK_BYTES(cap.out, cap.out_len, "t\n", 2);
  CHECK(cap.err_len == 0);
  memset(&cap, 0, sizeof cap);
  CHECK(sbsh_command_logs(c, id, 1, 2, -1, capture_output, &cap, NULL) == SBSH_OK);
  CHECK(cap.out_len == 0 && cap.err_len == 4 && cap.bad_stream == 0);
  CHECK(sbsh_command_logs(c, id, 0, 4, -1, capture_output, &cap, NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_command_logs(c, id, 0, 0, -1, NULL, NULL, NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_command_logs(c, 987654321, 0, 0, -1, capture_output, &cap, NULL) == SBSH_ERR_NOT_FOUND);
  CHECK(sbsh_session_remove(c, "logs") == SBSH_OK);
}

/* Sessions the kernel confines, through spec version 4: a confined one reads its root and
 * not a file beside it; no_network and the cgroup limits reach sbshd and read back; what is
 * wrong is refused before anything is asked of sbshd; an older version's fields are all
 * that is read or written. */
void test_confine(sbsh_conn* c) {
  note("confinement: spec version 4");
  char root[sizeof dir + 16], secret[sizeof dir + 16], path[sizeof root + 16], cmd[sizeof secret + 16];
  char out[256], err[512];
  snprintf(root, sizeof root, "%s/box", dir);
  snprintf(secret, sizeof secret, "%s/secret", dir);
  CHECK(mkdir(root, 0700) == 0);
  snprintf(path, sizeof path, "%s/inside", root);
  write_file(path, "inside\n");
  write_file(secret, "secret\n");
  snprintf(cmd, sizeof cmd, "cat %s", secret);

  /* An older version's structure is filled only as far as it goes, and its fields are all
   * that is read: version 3 with confine set past its end makes an unconfined session. */
  union {
    sbsh_session_spec spec;
    unsigned char bytes[sizeof(sbsh_session_spec)];
  } old;
  memset(&old, 0xab, sizeof old);
  sbsh_session_spec_init_size(&old.spec, offsetof(sbsh_session_spec, confine));
  CHECK(old.spec.version == 3 && old.spec.name == NULL && old.spec.setup_key_count == 0);
  CHECK(old.bytes[offsetof(sbsh_session_spec, confine)] == 0xab && old.bytes[sizeof old - 1] == 0xab);
  memset(&old, 0xab, sizeof old);
  (sbsh_session_spec_init)(&old.spec); /* the function programs built before the macro call */
  CHECK(old.spec.version == 1 && old.spec.snapshot == NULL && old.bytes[offsetof(sbsh_session_spec, root)] == 0xab);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  CHECK(spec.version == SBSH_SESSION_SPEC_VERSION && spec.version == 4 && spec.confine == 0 && spec.cpu_millis == 0);
  spec.name = "v3";
  spec.root = root;
  spec.version = 3;
  spec.confine = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  CHECK(run_in(c, "v3", cmd, out, sizeof out, err, sizeof err) == 0 && strcmp(out, "secret\n") == 0);
  CHECK(sbsh_session_remove(c, "v3") == SBSH_OK);

  sbsh_session_spec_init(&spec);
  spec.name = "box";
  spec.root = root;
  spec.confine = 1;
  int rc = sbsh_session_create_spec(c, &spec);
  if (rc == SBSH_ERR_REFUSED && strcmp(sbsh_last_error_code(c), "not_supported") == 0) {
    note("confinement skipped: %s", sbsh_last_error(c));
    return;
  }
  if (!CHECK(rc == SBSH_OK)) {
    fprintf(stderr, "  create box: %s\n", sbsh_last_error(c));
    return;
  }
  CHECK(run_in(c, "box", "cat inside", out, sizeof out, err, sizeof err) == 0 && strcmp(out, "inside\n") == 0);
  CHECK(run_in(c, "box", cmd, out, sizeof out, err, sizeof err) != 0 && out[0] == '\0');
  if (!CHECK(contains(err, "No such file or directory"))) fprintf(stderr, "  stderr: %s\n", err);
  char* json = NULL;
  CHECK(sbsh_session_show_json(c, "box", &json) == SBSH_OK);
  CHECK(json_int_after(json, "\"confinement\"", "\"landlock_abi\":") >= 1);
  CHECK(contains(json, "\"namespaces\":[\"pid\"]"));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "box") == SBSH_OK);

  /* Paths added to the rules: read-only here, so the secret beside the root can be read. */
  const char* ro[] = {secret};
  sbsh_session_spec_init(&spec);
  spec.name = "box2";
  spec.root = root;
  spec.confine = 1;
  spec.read_only = ro;
  spec.read_only_count = 1;
  spec.no_network = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  CHECK(run_in(c, "box2", cmd, out, sizeof out, err, sizeof err) == 0 && strcmp(out, "secret\n") == 0);
  json = NULL;
  CHECK(sbsh_session_show_json(c, "box2", &json) == SBSH_OK);
  CHECK(contains(json, "\"access\":\"read-only\"") && contains(json, "\"namespaces\":[\"pid\",\"net\"]"));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "box2") == SBSH_OK);

  /* A memory limit reaches sbshd: made where a cgroup v2 is delegated to it, else refused
   * with the reason. */
  sbsh_session_spec_init(&spec);
  spec.name = "capped-mem";
  spec.memory_max = 256u << 20;
  rc = sbsh_session_create_spec(c, &spec);
  if (rc == SBSH_OK) {
    json = NULL;
    CHECK(sbsh_session_show_json(c, "capped-mem", &json) == SBSH_OK);
    CHECK(json_int_after(json, "\"confinement\"", "\"memory_max\":") == 256L << 20);
    sbsh_free(json);
    CHECK(sbsh_session_remove(c, "capped-mem") == SBSH_OK);
  } else {
    CHECK(rc == SBSH_ERR_REFUSED && strcmp(sbsh_last_error_code(c), "not_supported") == 0);
    if (!CHECK(contains(sbsh_last_error(c), "memory") || contains(sbsh_last_error(c), "cgroup")))
      fprintf(stderr, "  memory refused: %s\n", sbsh_last_error(c));
  }

  /* What is wrong is refused, saying what. */
  const char* relative[] = {"out"};
  sbsh_session_spec_init(&spec);
  spec.name = "bad";
  spec.root = root;
  spec.allow_write = relative;
  spec.allow_write_count = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "set confine too"));
  spec.confine = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "'out'") &&
        contains(sbsh_last_error(c), "must be absolute"));
  spec.allow_write_count = 0;
  spec.root = NULL;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "set root or snapshot"));
}

/* Edit, lines, search and a listing to a depth, in the session "files" whose root is copy:
 * the file's exact bytes after each edit, the exact lines and matches given. */
static void test_file_operations(sbsh_conn* c, const char* copy) {
  note("file operations: edit, read lines, search, list to a depth");
  static const char text[] = "alpha\nbeta\nalpha beta\ngamma";
  CHECK(sbsh_file_write(c, "files", "ops/t.txt", text, sizeof text - 1, -1, 1) == SBSH_OK);
  CHECK(sbsh_file_write(c, "files", "ops/deep/u.py", "x = 'Alpha'\n", 12, -1, 1) == SBSH_OK);
  char path[sizeof state_dir + 64];
  snprintf(path, sizeof path, "%s/ops/t.txt", copy);
  char* json = NULL;
  /* Twice without replace_all: refused, the file as it was. */
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "alpha", 5, "ALPHA", 5, 0, &json) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "not_unique") == 0 && contains(sbsh_last_error(c), "occurs 2 times"));
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "delta", 5, "x", 1, 0, NULL) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "no_match") == 0);
  char* data = NULL;
  size_t len = 0;
  CHECK(sbsh_file_read(c, "files", "ops/t.txt", 0, -1, &data, &len) == SBSH_OK);
  CHECK_BYTES(data, len, text, sizeof text - 1);
  sbsh_free(data);
  /* Once, across lines, with a NUL in the new text: exact bytes. */
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "beta\nalpha", 10, "b\0b\nalpha", 9, 0, &json) == SBSH_OK);
  CHECK(json != NULL && contains(json, "\"replacements\":1") && contains(json, "\"first_line\":2") &&
        contains(json, "\"bytes\":26"));
  sbsh_free(json);
  static const char once[] = "alpha\nb\0b\nalpha beta\ngamma";
  CHECK(sbsh_file_read(c, "files", "ops/t.txt", 0, -1, &data, &len) == SBSH_OK);
  CHECK_BYTES(data, len, once, sizeof once - 1);
  sbsh_free(data);
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "alpha", 5, "A", 1, 1, NULL) == SBSH_OK);
  static const char all[] = "A\nb\0b\nA beta\ngamma";
  CHECK(sbsh_file_read(c, "files", "ops/t.txt", 0, -1, &data, &len) == SBSH_OK);
  CHECK_BYTES(data, len, all, sizeof all - 1);
  sbsh_free(data);
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "", 0, "x", 1, 0, NULL) == SBSH_ERR_INVALID);

  /* Lines 2 and 3, then the last one (no newline after it). */
  json = NULL;
  CHECK(sbsh_file_read_lines(c, "files", "ops/t.txt", 2, 2, &data, &len, &json) == SBSH_OK);
  CHECK_BYTES(data, len, "b\0b\nA beta\n", 11);
  CHECK(json != NULL && contains(json, "\"start_line\":2") && contains(json, "\"end_line\":3") &&
        contains(json, "\"total_lines\":4") && contains(json, "\"truncated\":true") &&
        contains(json, "\"encoding\":\"utf-8\""));
  sbsh_free(data);
  sbsh_free(json);
  CHECK(sbsh_file_read_lines(c, "files", "ops/t.txt", -1, -1, &data, &len, NULL) == SBSH_OK);
  CHECK_BYTES(data, len, "gamma", 5);
  sbsh_free(data);
  CHECK(sbsh_file_read_lines(c, "files", "ops/t.txt", 0, -1, &data, &len, NULL) == SBSH_ERR_INVALID);
  /* A NUL in the old text too; the file is text again (a search leaves out files with a NUL). */
  CHECK(sbsh_file_edit(c, "files", "ops/t.txt", "b\0b", 3, "beta", 4, 0, NULL) == SBSH_OK);

  /* A search, regardless of case, and one limited to *.py. */
  json = NULL;
  CHECK(sbsh_file_search_json(c, "files", "^a", "ops", NULL, 1, &json) == SBSH_OK);
  CHECK(json != NULL &&
        contains(json,
                 "\"matches\":[{\"path\":\"t.txt\",\"line\":1,\"text\":\"A\"},"
                 "{\"path\":\"t.txt\",\"line\":3,\"text\":\"A beta\"}]") &&
        contains(json, "\"files_searched\":2"));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_file_search_json(c, "files", "Alpha", "ops", "*.py", 0, &json) == SBSH_OK);
  CHECK(json != NULL && contains(json, "\"matches\":[{\"path\":\"deep/u.py\",\"line\":1,\"text\":\"x = 'Alpha'\"}]"));
  sbsh_free(json);
  CHECK(sbsh_file_search_json(c, "files", "(", "ops", NULL, 0, &json) == SBSH_ERR_INVALID);

  json = NULL;
  CHECK(sbsh_file_list_depth_json(c, "files", "ops", 1, &json) == SBSH_OK);
  CHECK(json != NULL && contains(json, "\"path\":\"deep\"") && contains(json, "\"path\":\"t.txt\"") &&
        !contains(json, "deep/u.py"));
  sbsh_free(json);
  CHECK(sbsh_file_list_depth_json(c, "files", "ops", 0, &json) == SBSH_ERR_INVALID);
  CHECK(sbsh_file_remove(c, "files", "ops", 1) == SBSH_OK);
}

void test_files(sbsh_conn* c) {
  note("files beneath a session's root: write, read, stat, list, move, remove, confinement");
  char src[sizeof dir + 16], copy[sizeof state_dir + 32], path[sizeof copy + 32];
  snprintf(src, sizeof src, "%s/filesrc", dir);
  snprintf(copy, sizeof copy, "%s/snapshots/files", state_dir);
  CHECK(mkdir(src, 0700) == 0);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = "files";
  spec.snapshot = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);

  static const char bytes[] = {'a', '\0', (char)0xff, '\n', 'z'};
  CHECK(sbsh_file_write(c, "files", "d/one", bytes, sizeof bytes, 0600, 1) == SBSH_OK);
  char* data = NULL;
  size_t len = 0;
  CHECK(sbsh_file_read(c, "files", "d/one", 0, -1, &data, &len) == SBSH_OK);
  CHECK_BYTES(data, len, bytes, sizeof bytes);
  sbsh_free(data);
  CHECK(sbsh_file_read(c, "files", "d/one", 1, 2, &data, &len) == SBSH_OK);
  CHECK_BYTES(data, len, bytes + 1, 2);
  sbsh_free(data);
  struct stat st;
  snprintf(path, sizeof path, "%s/d/one", copy);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);

  /* Through descriptors: a pipe in, a file out. */
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK(write(p[1], "piped\n", 6) == 6);
  close(p[1]);
  uint64_t n = 0;
  CHECK(sbsh_file_write_fd(c, "files", "two", p[0], -1, 0, &n) == SBSH_OK && n == 6);
  close(p[0]);
  char out_path[sizeof dir + 16];
  snprintf(out_path, sizeof out_path, "%s/two.out", dir);
  int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(out >= 0 && sbsh_file_read_fd(c, "files", "two", out, 0, -1, &n) == SBSH_OK && n == 6);
  close(out);
  char line[16] = "";
  FILE* f = fopen(out_path, "r");
  CHECK(f != NULL && fgets(line, sizeof line, f) != NULL && strcmp(line, "piped\n") == 0);
  if (f != NULL) fclose(f);

  char* json = NULL;
  CHECK(sbsh_file_stat_json(c, "files", "d/one", &json) == SBSH_OK);
  CHECK(contains(json, "\"type\":\"file\"") && contains(json, "\"size\":5") && contains(json, "\"mode\":\"0600\""));
  sbsh_free(json);
  CHECK(sbsh_file_mkdir(c, "files", "e/f", 1) == SBSH_OK);
  CHECK(sbsh_file_move(c, "files", "two", "e/f/two") == SBSH_OK);
  json = NULL;
  CHECK(sbsh_file_list_json(c, "files", NULL, 1, &json) == SBSH_OK);
  CHECK(contains(json, "\"path\":\"e/f/two\"") && contains(json, "\"path\":\"d/one\"") && !contains(json, "\"path\":\"two\""));
  sbsh_free(json);
  CHECK(sbsh_file_remove(c, "files", "e", 0) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "file_failed") == 0);
  CHECK(sbsh_file_remove(c, "files", "e", 1) == SBSH_OK);

  CHECK(sbsh_file_read(c, "files", "../../../etc/passwd", 0, -1, &data, &len) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0 && contains(sbsh_last_error(c), "'../../../etc/passwd'"));
  CHECK(sbsh_file_write(c, "files", "/etc/sbsh-must-not-exist", "x", 1, -1, 1) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0);
  CHECK(access("/etc/sbsh-must-not-exist", F_OK) != 0);
  CHECK(sbsh_file_read(c, "c-api", "x", 0, -1, &data, &len) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "no_root") == 0);
  CHECK(sbsh_file_read(c, "files", NULL, 0, -1, &data, &len) == SBSH_ERR_INVALID);
  test_file_operations(c, copy);
  CHECK(sbsh_session_remove(c, "files") == SBSH_OK);
}

void test_processes(sbsh_conn* c) {
  note("background processes: start, wait, logs, list, kill");
  uint64_t id = 0;
  CHECK(sbsh_start(c, "echo out-$P; echo err >&2; exit 4", "c-api", "job", NULL, (const char* []){"P=p"}, 1, &id) ==
            SBSH_OK &&
        id > 0);
  sbsh_proc* p = NULL;
  CHECK(sbsh_wait(c, "job", 10000, &p) == SBSH_OK && p != NULL);
  if (p != NULL) {
    CHECK(sbsh_proc_id(p) == id && strcmp(sbsh_proc_name(p), "job") == 0);
    CHECK(strcmp(sbsh_proc_state(p), "exited") == 0);
    CHECK(sbsh_proc_has_exit_code(p) && sbsh_proc_exit_code(p) == 4 && sbsh_proc_signal(p) == 0);
    CHECK(strcmp(sbsh_proc_session(p), "c-api") == 0);
    CHECK(sbsh_proc_ended_at_ms(p) >= sbsh_proc_started_at_ms(p) && sbsh_proc_started_at_ms(p) > 0);
    CHECK(strlen(sbsh_proc_log_path(p)) > 0);
    sbsh_proc_free(p);
  }
  struct capture cap;
  memset(&cap, 0, sizeof cap);
  CHECK(sbsh_logs(c, "job", 0, 0, 0, -1, capture_output, &cap, NULL) == SBSH_OK);
  CHECK_BYTES(cap.out, cap.out_len, "out-p\n", 6);
  CHECK_BYTES(cap.err, cap.err_len, "err\n", 4);
  memset(&cap, 0, sizeof cap);
  char idstr[32];
  snprintf(idstr, sizeof idstr, "%llu", (unsigned long long)id);
  CHECK(sbsh_logs(c, idstr, 0, 0, 2, -1, capture_output, &cap, NULL) == SBSH_OK); /* by id, stderr only */
  CHECK(cap.out_len == 0);
  CHECK_BYTES(cap.err, cap.err_len, "err\n", 4);

  char* json = NULL;
  CHECK(sbsh_processes_json(c, 1, &json) == SBSH_OK && contains(json, "\"name\":\"job\""));
  CHECK(contains(json, "\"exit_code\":4"));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_processes_json(c, 0, &json) == SBSH_OK && !contains(json, "\"name\":\"job\""));
  sbsh_free(json);

  /* logs --follow streams until the process ends. */
  CHECK(sbsh_start(c, "for i in 1 2 3; do echo $i; sleep 0.1; done", "c-api", "ticker", NULL, NULL, 0, NULL) ==
        SBSH_OK);
  memset(&cap, 0, sizeof cap);
  p = NULL;
  CHECK(sbsh_logs(c, "ticker", 1, 0, 0, -1, capture_output, &cap, &p) == SBSH_OK);
  CHECK_BYTES(cap.out, cap.out_len, "1\n2\n3\n", 6);
  CHECK(p != NULL && strcmp(sbsh_proc_state(p), "exited") == 0);
  sbsh_proc_free(p);

  /* A process tree: a timeout of wait leaves it running; kill ends all of it. */
  CHECK(sbsh_start(c, "sleep 100 & sleep 100; wait", "c-api", "long", NULL, NULL, 0, NULL) == SBSH_OK);
  /* A follow ends early through a canceller (here, one asked before): the process goes on. */
  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK);
  sbsh_canceller_cancel(k);
  p = NULL;
  int64_t t0 = now_ms();
  CHECK(sbsh_logs(c, "long", 1, 0, 0, sbsh_canceller_fd(k), capture_output, &cap, &p) == SBSH_OK);
  CHECK(now_ms() - t0 < 10000);
  CHECK(p != NULL && strcmp(sbsh_proc_state(p), "running") == 0);
  sbsh_proc_free(p);
  sbsh_canceller_free(k);
  p = (sbsh_proc*)1;
  CHECK(sbsh_wait(c, "long", 200, &p) == SBSH_ERR_TIMEOUT && p == (sbsh_proc*)1);
  CHECK(strcmp(sbsh_last_error_code(c), "timeout") == 0);
  json = NULL;
  CHECK(sbsh_processes_json(c, 0, &json) == SBSH_OK);
  long pid = json != NULL ? json_int_after(json, "\"name\":\"long\"", "\"pid\":") : -1;
  sbsh_free(json);
  CHECK(pid > 1 && kill((pid_t)-pid, 0) == 0);
  p = NULL;
  CHECK(sbsh_kill(c, "long", SIGTERM, &p) == SBSH_OK && p != NULL);
  if (p != NULL) {
    CHECK(strcmp(sbsh_proc_state(p), "killed") == 0 && sbsh_proc_signal(p) == SIGTERM);
    CHECK(sbsh_proc_pid(p) == pid);
    sbsh_proc_free(p);
  }
  /* The whole group goes: kill returns when the leader has ended; its children were
   * signalled with it and are reaped by the wrapper (a subreaper) moments later. */
  if (pid > 1) CHECK(group_gone_within((pid_t)pid, 5000));
}

struct events {
  int count, finished, unterminated;
};
static void count_event(void* user, const char* json, size_t len) {
  struct events* ev = user;
  ++ev->count;
  if (json[len] != '\0' || json[0] != '{' || json[len - 1] != '}') ++ev->unterminated;
  if (strstr(json, "\"event\":\"plan_finished\"") != NULL) ++ev->finished;
}

static char* read_whole(const char* path) {
  static char buf[65536];
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

void test_plans(sbsh_conn* c) {
  note("plans: run, report, events, invalid plans, cancel");
  const char* plan =
      "{\"stages\": [{\"name\": \"a\", \"commands\": [\"export P=1\", \"echo $P\"]},"
      " {\"name\": \"b\", \"expect\": \"failure\", \"commands\": [\"(exit 3)\"]}]}";
  char report_path[256], events_path[256];
  snprintf(report_path, sizeof report_path, "%s/report.json", dir);
  snprintf(events_path, sizeof events_path, "%s/events.jsonl", dir);
  sbsh_run_opts o;
  sbsh_run_opts_init(&o);
  CHECK(o.version == SBSH_RUN_OPTS_VERSION && o.events_fd == -1 && o.cancel_fd == -1);
  struct events ev = {0, 0, 0};
  o.on_event = count_event;
  o.user = &ev;
  o.report_path = report_path;
  o.events_path = events_path;
  char* report = NULL;
  int status = -1;
  if (!CHECK(sbsh_run_plan(c, plan, strlen(plan), NULL, &o, &report, &status) == SBSH_OK && report != NULL)) {
    fprintf(stderr, "  run_plan: %s\n", sbsh_last_error(c));
    return;
  }
  CHECK(status == 0);
  CHECK(contains(report, "\"status\":\"passed\""));
  CHECK(contains(report, "\"stdout\":\"1\\n\""));  /* state carried from one command to the next */
  CHECK(json_int_after(report, "\"(exit 3)\"", "\"exit_code\":") == 3);
  /* plan, 2 stages x (start, finish), 3 commands x (start, finish), plan: 12 events. */
  CHECK(ev.count == 12 && ev.finished == 1 && ev.unterminated == 0);
  char* saved = read_whole(report_path);
  CHECK(saved != NULL && strncmp(saved, report, strlen(report)) == 0 && saved[strlen(report)] == '\n');
  saved = read_whole(events_path);
  CHECK(saved != NULL && contains(saved, "{\"event\":\"plan_started\"") && contains(saved, "\"event\":\"plan_finished\""));
  sbsh_free(report);

  /* YAML, and a stage that does not meet its expectation: status 1. */
  const char* yaml = "stages:\n  - {name: s, commands: ['false', 'true']}\n";
  sbsh_run_opts_init(&o);
  report = NULL;
  CHECK(sbsh_run_plan(c, yaml, strlen(yaml), "yaml", &o, &report, &status) == SBSH_OK && status == 1);
  CHECK(contains(report, "\"status\":\"failed\"") && contains(report, "\"status\":\"skipped\""));
  sbsh_free(report);

  /* Invalid plans: nothing runs, and the message names the field. */
  const char* bad = "stages:\n  - {name: a, commands: [x]}\n  - {name: b, commands: [{run: make, timeout: 10 minutes}]}\n";
  CHECK(sbsh_plan_check(bad, strlen(bad), NULL) == SBSH_ERR_INVALID);
  CHECK(strcmp(sbsh_last_error_code(NULL), "invalid_plan") == 0);
  CHECK(contains(sbsh_last_error(NULL), "stages[1].commands[0].timeout: \"10 minutes\" is not a duration"));
  CHECK(sbsh_plan_check(plan, strlen(plan), "json") == SBSH_OK);
  CHECK(sbsh_plan_check(plan, strlen(plan), "xml") == SBSH_ERR_INVALID);
  report = NULL;
  CHECK(sbsh_run_plan(c, bad, strlen(bad), NULL, &o, &report, &status) == SBSH_ERR_INVALID && report == NULL);
  CHECK(contains(sbsh_last_error(c), "stages[1].commands[0].timeout"));
  sbsh_run_opts zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  CHECK(sbsh_run_plan(c, plan, strlen(plan), NULL, &zeroed, NULL, NULL) == SBSH_ERR_INVALID);
  CHECK(contains(sbsh_last_error(c), "sbsh_run_opts_init"));

  /* From a file, with a canceller that was cancelled before: nothing runs, the report says
   * cancelled, and the status is 130. */
  char plan_path[256];
  snprintf(plan_path, sizeof plan_path, "%s/plan.yaml", dir);
  FILE* f = fopen(plan_path, "w");
  if (!CHECK(f != NULL)) return;
  fputs("stages: [{name: s, commands: ['touch never']}]\n", f);
  fclose(f);
  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK);
  sbsh_canceller_cancel(k);
  o.cancel_fd = sbsh_canceller_fd(k);
  report = NULL;
  CHECK(sbsh_run_plan_file(c, plan_path, &o, &report, &status) == SBSH_OK && status == 130);
  CHECK(contains(report, "\"status\":\"cancelled\""));
  sbsh_free(report);
  sbsh_canceller_free(k);
  o.cancel_fd = -1;
  snprintf(plan_path, sizeof plan_path, "%s/no-such-plan.yaml", dir);
  CHECK(sbsh_run_plan_file(c, plan_path, &o, NULL, NULL) == SBSH_ERR_INVALID);
  CHECK(strcmp(sbsh_last_error_code(c), "file") == 0 && contains(sbsh_last_error(c), "no-such-plan.yaml"));
  /* The connection serves on. */
  EXPECT_STDOUT(c, "after-plans", "echo after", "after\n");
}

/* The generic call: a request written as JSON, checked against its declaration, sent, and
 * its reply's JSON form; each kind of bad request is refused before anything is sent. */
void test_request_json(sbsh_conn* c) {
  note("sbsh_request_json: any request as JSON");
  char* reply = NULL;
  EXPECT_STDOUT(c, "generic", "export MARK=set; echo $MARK", "set\n");
  CHECK(sbsh_request_json(c, "{\"type\": \"session_show\", \"name\": \"generic\"}", &reply) == SBSH_OK &&
        reply != NULL && contains(reply, "\"session\":{\"session\":{\"name\":\"generic\""));
  sbsh_free(reply);
  reply = NULL;
  /* A restart through it replaces the shell: the variable is gone. */
  CHECK(sbsh_request_json(c, "{\"type\": \"session_restart\", \"name\": \"generic\"}", &reply) == SBSH_OK &&
        reply != NULL && strcmp(reply, "{}") == 0);
  sbsh_free(reply);
  reply = NULL;
  EXPECT_STDOUT(c, "generic", "echo ${MARK:-unset}", "unset\n");
  CHECK(sbsh_request_json(c, "{\"type\": \"session_list\"}", &reply) == SBSH_OK && reply != NULL &&
        contains(reply, "{\"sessions\":[") && contains(reply, "\"name\":\"generic\""));
  sbsh_free(reply);
  reply = NULL;
  /* sbshd's refusals are the call's errors, as for the other calls. */
  CHECK(sbsh_request_json(c, "{\"type\": \"session_show\", \"name\": \"nowhere\"}", &reply) == SBSH_ERR_NOT_FOUND &&
        reply == NULL && strcmp(sbsh_last_error_code(c), "no_such_session") == 0);
  /* Each kind of bad request, named. */
  struct {
    const char* request;
    const char* says;
  } bad[] = {
      {"{\"type\": \"session_show\"", "not JSON"},
      {"[1, 2]", "a JSON object"},
      {"{\"name\": \"generic\"}", "names its type"},
      {"{\"type\": \"session_shwo\"}", "unknown request type 'session_shwo'"},
      {"{\"type\": \"exec\", \"command\": \"true\"}", "'exec' is not sent by the generic call"},
      {"{\"type\": \"session_show\", \"nmae\": \"generic\"}", "no field 'nmae' (its fields: name)"},
      {"{\"type\": \"session_show\", \"name\": 5}", "name"},
      {"{\"type\": \"session_show\"}", "needs 'name'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = sbsh_request_json(c, bad[i].request, &reply);
    if (!CHECK(rc == SBSH_ERR_INVALID && reply == NULL && contains(sbsh_last_error(c), bad[i].says)))
      note("  %s: %s (%s)", bad[i].request, sbsh_error_name(rc), sbsh_last_error(c));
  }
  CHECK(sbsh_request_json(c, NULL, &reply) == SBSH_ERR_INVALID);
  /* The connection still serves: the refusals sent nothing. */
  CHECK(sbsh_request_json(c, "{\"type\": \"session_rm\", \"name\": \"generic\"}", &reply) == SBSH_OK &&
        reply != NULL && strcmp(reply, "{}") == 0);
  sbsh_free(reply);
  reply = NULL;
  CHECK(sbsh_sessions_json(c, &reply) == SBSH_OK && reply != NULL && !contains(reply, "\"generic\""));
  sbsh_free(reply);
}
