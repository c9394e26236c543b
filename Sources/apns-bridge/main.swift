#if canImport(Glibc)
import Glibc
#endif

import Observability

// The command line of apns-bridge (contract §9). Each subcommand lives in its own file.
// Arguments are read as they were given: `CommandLine.arguments` would replace bytes that are
// not UTF-8 (in a payload, a path) without a word, so such an argument is a usage error instead.
var arguments: [String] = []
var unreadable: Int?
for index in 1..<max(1, Int(CommandLine.argc)) {   // argc may be 0 (an empty argv)
    // invariant: argv holds argc non-null entries.
    guard let argument = String(validatingCString: CommandLine.unsafeArgv[index]!) else {
        unreadable = unreadable ?? index
        continue
    }
    arguments.append(argument)
}
let status: Int32
if let unreadable {
    CommandLineInterface.write("apns-bridge: argument \(unreadable) is not valid UTF-8\n", to: 2)
    status = 2
} else {
    status = CommandLineInterface.main(arguments)
}
LoggingSystem.flush()  // counts of repeated warnings not written yet
exit(status)
