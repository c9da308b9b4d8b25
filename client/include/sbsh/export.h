/* export.h: SBSH_API marks what libsbsh.so exports.
 *
 * libsbsh is compiled with -fvisibility=hidden, so everything it contains stays inside the
 * library (its copies of fmt and msgpack included) unless it is declared with SBSH_API:
 * the C ABI of <sbsh/sbsh.h> and the C++ API of <sbsh/client.h>. The version script
 * (client/libsbsh.map) then gives each exported symbol its version node. For a program
 * that includes the headers, or links libsbsh.a, the attribute changes nothing.
 */
#ifndef SBSH_EXPORT_H
#define SBSH_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SBSH_API __attribute__((visibility("default")))
#else
#define SBSH_API
#endif

#endif /* SBSH_EXPORT_H */
