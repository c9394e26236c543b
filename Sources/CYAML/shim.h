#ifndef APNS_BRIDGE_CYAML_SHIM_H
#define APNS_BRIDGE_CYAML_SHIM_H
#include <yaml.h>
#endif
