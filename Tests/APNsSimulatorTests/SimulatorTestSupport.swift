@_exported import TestSupport

let sampleToken = String(repeating: "ab", count: 32)
let sampleTopic = "com.example.chat"
