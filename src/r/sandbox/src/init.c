/* The .Call entries R may reach (NAMESPACE: useDynLib with .registration), and no symbol besides. */
#include <R_ext/Rdynload.h>
#include "sandbox.h"

static const R_CallMethodDef CALLS[] = {
    {"rock_private_tmp", (DL_FUNC)&private_tmp, 1},
    {"rock_minimal_root", (DL_FUNC)&minimal_root, 4},
    {"rock_no_network", (DL_FUNC)&no_network, 0},
    {"rock_router_network", (DL_FUNC)&router_network, 3},
    {"rock_open_namespace", (DL_FUNC)&open_namespace, 1},
    {"rock_private_file", (DL_FUNC)&private_file, 2},
    {NULL, NULL, 0}};

void R_init_rocksandbox(DllInfo *info) {
  R_registerRoutines(info, NULL, CALLS, NULL, NULL);
  R_useDynamicSymbols(info, FALSE);
  R_forceSymbols(info, TRUE);
}
