/* What confines a forked R session beyond its uid, run while it is still root, before it drops to its
 * uid: a mount namespace of its own (every mount made private there, so nothing propagates back to the
 * host) with fresh tmpfs on /tmp, /var/tmp and /dev/shm, or a whole minimal root of its own (mounts.c);
 * a network namespace with loopback only, or with a link to the service's router namespace besides
 * (network.c). R calls them through the table of init.c. */
#ifndef ROCKSANDBOX_H
#define ROCKSANDBOX_H

#include <R.h>
#include <Rinternals.h>
#include <R_ext/Visibility.h>

/* Hidden from the shared object's symbols: R reaches them through init.c's table alone. */
attribute_hidden SEXP private_tmp(SEXP keep_);
attribute_hidden SEXP minimal_root(SEXP read_only_, SEXP read_write_, SEXP files_, SEXP private_tmp_);
attribute_hidden SEXP private_file(SEXP source_, SEXP target_);
attribute_hidden SEXP no_network(void);
attribute_hidden SEXP router_network(SEXP router_, SEXP link_, SEXP name_);
attribute_hidden SEXP open_namespace(SEXP path_);

#endif
