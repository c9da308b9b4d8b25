/* Uses an installed libsbsh through its C ABI, from C: a session keeps its directory between
 * two execs. Prints the second's output and exits with its exit code (3).
 * Usage: PROGRAM SOCKET */
#include <sbsh/sbsh.h>

#include <stdio.h>

static int run(sbsh_conn* c, const char* command, sbsh_result** out) {
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "install-test-c";
  o.command = command;
  return sbsh_exec(c, &o, out);
}

int main(int argc, char** argv) {
  sbsh_conn* c;
  sbsh_result* r;
  size_t n;
  const char* out;
  int code;
  if (argc != 2) return 100;
  if (sbsh_connect(argv[1], 0, &c) != SBSH_OK) {
    fprintf(stderr, "connect: %s\n", sbsh_last_error(NULL));
    return 101;
  }
  if (run(c, "cd /tmp", &r) != SBSH_OK) return 102;
  code = sbsh_result_exit_code(r);
  sbsh_result_free(r);
  if (code != 0) return 102;
  if (run(c, "pwd; exit 3", &r) != SBSH_OK) {
    fprintf(stderr, "exec: %s\n", sbsh_last_error(c));
    return 103;
  }
  out = sbsh_result_stdout(r, &n);
  fwrite(out, 1, n, stdout);
  code = sbsh_result_has_exit_code(r) ? sbsh_result_exit_code(r) : 104;
  sbsh_result_free(r);
  sbsh_close(c);
  return code;
}
