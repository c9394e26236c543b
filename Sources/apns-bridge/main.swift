#if canImport(Glibc)
import Glibc
#endif

// The command line of apns-bridge (contract §9). Each subcommand lives in its own file.
exit(CommandLineInterface.main(Array(CommandLine.arguments.dropFirst())))
