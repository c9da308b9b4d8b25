/* A tiny stand-in for awkward programs in functional tests.
 *   fds                 print the numbers of the open descriptors, e.g. "0 1 2"
 *   pgid                print "pid pgid sid"
 *   ignore-term SECS    ignore SIGTERM, print the pid, sleep
 *   write N [err]       write N bytes of a repeating pattern to stdout (or stderr)
 *   spawn-setsid SECS   fork a child that calls setsid(); print "parent child"; sleep
 *   unix-send PATH TEXT connect to the unix socket PATH, send TEXT, read until the peer closes
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int cmp_int(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "fds") == 0) {
    DIR* d = opendir("/proc/self/fd");
    int fds[256], n = 0, self = dirfd(d);
    struct dirent* e;
    while ((e = readdir(d)) != NULL && n < 256) {
      if (e->d_name[0] == '.') continue;
      int fd = atoi(e->d_name);
      if (fd != self) fds[n++] = fd;
    }
    closedir(d);
    qsort(fds, n, sizeof fds[0], cmp_int);
    for (int i = 0; i < n; ++i) printf(i ? " %d" : "%d", fds[i]);
    printf("\n");
    return 0;
  }
  if (strcmp(argv[1], "pgid") == 0) {
    printf("%d %d %d\n", (int)getpid(), (int)getpgid(0), (int)getsid(0));
    return 0;
  }
  if (strcmp(argv[1], "ignore-term") == 0 && argc > 2) {
    signal(SIGTERM, SIG_IGN);
    printf("%d\n", (int)getpid());
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
    return 0;
  }
  if (strcmp(argv[1], "write") == 0 && argc > 2) {
    long long n = atoll(argv[2]);
    FILE* out = argc > 3 && strcmp(argv[3], "err") == 0 ? stderr : stdout;
    static char buf[65536];
    for (size_t i = 0; i < sizeof buf; ++i) buf[i] = (char)('a' + i % 26);
    while (n > 0) {
      size_t chunk = n < (long long)sizeof buf ? (size_t)n : sizeof buf;
      if (fwrite(buf, 1, chunk, out) != chunk) return 1;
      n -= (long long)chunk;
    }
    return 0;
  }
  if (strcmp(argv[1], "spawn-setsid") == 0 && argc > 2) {
    pid_t child = fork();
    if (child == 0) {
      setsid();
      sleep((unsigned)atoi(argv[2]));
      _exit(0);
    }
    printf("%d %d\n", (int)getpid(), (int)child);
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
    return 0;
  }
  if (strcmp(argv[1], "unix-send") == 0 && argc > 3) {
    struct sockaddr_un addr = {0};
    addr.sun_family = AF_UNIX;
    if (strlen(argv[2]) >= sizeof addr.sun_path) return 3;
    strcpy(addr.sun_path, argv[2]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) return 4;
    size_t n = strlen(argv[3]);
    if (write(fd, argv[3], n) != (ssize_t)n) return 5;
    char buf[256];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
    return 0;
  }
  return 2;
}
