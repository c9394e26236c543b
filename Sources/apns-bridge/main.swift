#if canImport(Glibc)
import Glibc
#endif

import Observability

// The command line of apns-bridge (contract §9). Each subcommand lives in its own file.
let status = CommandLineInterface.main(Array(CommandLine.arguments.dropFirst()))
LoggingSystem.flush()  // counts of repeated warnings not written yet
exit(status)
