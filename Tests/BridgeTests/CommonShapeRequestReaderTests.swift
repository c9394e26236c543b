@testable import Bridge
import BridgeLocal
import Testing

/// The decoder's fast path against its general path: what the fast path takes it decodes to the
/// same request, and everything else it leaves to the general path.
///
/// Apps, source and tokens are those of `PushRequestDecoderTests`.
@Suite struct CommonShapeRequestReaderTests {
    static let source = PushRequestDecoderTests.source
    static let tokenA = PushRequestDecoderTests.tokenA
    static let tokenB = PushRequestDecoderTests.tokenB
    static let payload = #"{"aps":{"alert":{"title":"Hi","body":"Caf\u00e9 ☕"},"sound":"default"},"n":[1,-2.5e3,true,null]}"#

    let decoders = [PushRequestDecoderTests().single, PushRequestDecoderTests().multi]

    func fast(_ text: String, _ decoder: PushRequestDecoder) -> PushRequest? {
        Array(text.utf8).withUnsafeBufferPointer { try? decoder.decodeCommonShape($0, source: Self.source) }
    }

    func general(_ text: String, _ decoder: PushRequestDecoder) -> PushRequestDecoding {
        decoder.decodeInGeneral(value: Array(text.utf8), source: Self.source)
    }

    @Test(arguments: [
        #"{"id":"bench-1","app":"chat","tokens":["\#(CommonShapeRequestReaderTests.tokenA)"],"payload":\#(CommonShapeRequestReaderTests.payload)}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA.uppercased())","payload":{}}"#,
        #" {"app" : "legacy" , "tokens" : [ "\#(CommonShapeRequestReaderTests.tokenA)" , "\#(CommonShapeRequestReaderTests.tokenB.uppercased())" , "\#(CommonShapeRequestReaderTests.tokenA)" ] , "payload" : {"aps":{}} } "#,
        #"{"id":"x","app":"chat","token":"\#(CommonShapeRequestReaderTests.tokenB)","payload":{"aps":{"content-available":1}},"push_type":"background","priority":1,"expiration":0,"collapse_id":"c1","topic":"com.other.app","environment":"sandbox","apns_id":"0E9C3B44-1B8A-4E5B-9C0D-7A1B2C3D4E5F","unknown":{"nested":["é",{"deep":"\"quoted\""}]},"other":null}"#,
        "{\"tokens\":[\"\(CommonShapeRequestReaderTests.tokenA)\"],\n\t\"payload\":{},\r\n\"priority\":5,\"expiration\":999999999999999999}",
        #"{"id":"\#(String(repeating: "i", count: 256))","token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"push_type":"voip"}"#,
    ])
    func commonShapesTakeTheFastPathToTheGeneralPathsRequest(text: String) throws {
        var requests = 0
        for decoder in decoders {
            // A request without `app` has none with two apps; `legacy` is unknown to the one-app decoder.
            guard case .request(let expected) = general(text, decoder) else {
                #expect(fast(text, decoder) == nil)
                continue
            }
            requests += 1
            let taken = try #require(fast(text, decoder), "the fast path left a common request to the general path")
            #expect(taken == expected)
        }
        #expect(requests > 0)
    }

    @Test(arguments: [
        #"{"token":null,"tokens":["\#(CommonShapeRequestReaderTests.tokenA)"],"payload":{}}"#,  // null counts as absent: general path
        #"{"tok\u0065n":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{}}"#,  // an escaped name
        #"{"id":"caf\u00e9","token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{}}"#,  // an escaped value
        #"{"id":"café","token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{}}"#,  // non-ASCII
        #"{"tokens":["\#(CommonShapeRequestReaderTests.tokenA)","not-a-token"],"payload":{}}"#,  // an invalid token
        #"{"tokens":[],"payload":{}}"#,
        #"{"tokens":["\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenA)"],"payload":{}}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","tokens":["\#(CommonShapeRequestReaderTests.tokenB)"],"payload":{}}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"payload":{}}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"expiration":1000000000000000000}"#,  // 19 digits
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"priority":10.0}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"priority":1e1}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"priority":010}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"priority":-1}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"priority":7}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{}} x"#,
        "\u{FEFF}{\"token\":\"\(CommonShapeRequestReaderTests.tokenA)\",\"payload\":{}}",
        "{}",
        "[]",
        #"{"app":"nope","token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{}}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":[]}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{"a":"\#(String(repeating: "x", count: 4100))"}}"#,
        "{\"token\":\"\(CommonShapeRequestReaderTests.tokenA)\",\"payload\":{},\"topic\":\"com.\u{7F}\"}",
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"collapse_id":"\#(String(repeating: "c", count: 65))"}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"collapse_id":" c"}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"topic":"com.example.chat "}"#,
        #"{"tokens":["\#(CommonShapeRequestReaderTests.tokenA)","\#(CommonShapeRequestReaderTests.tokenB)"],"payload":{},"apns_id":"0e9c3b44-1b8a-4e5b-9c0d-7a1b2c3d4e5f"}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"push_type":"fax"}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"environment":"staging"}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"id":""}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{"a":[[[[1]]]],"b":"\x"}}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)","payload":{},"unknown":tru}"#,
        #"{"token":"\#(CommonShapeRequestReaderTests.tokenA)""#,
    ])
    func everythingElseIsLeftToTheGeneralPath(text: String) {
        for decoder in decoders {
            #expect(fast(text, decoder) == nil)
            #expect(decoder.decode(value: Array(text.utf8), source: Self.source) == general(text, decoder))
        }
    }

    /// Requests cut, spliced and sprinkled with JSON's special bytes: whenever the fast path takes
    /// one, it decodes it as the general path does, and `decode` always answers as the general
    /// path does.
    @Test func mutatedRequestsDecodeAsTheGeneralPathDecodesThem() {
        let seeds = [
            #"{"id":"bench-1","app":"chat","tokens":["\#(Self.tokenA)","\#(Self.tokenB)"],"payload":{"aps":{"alert":"hi","badge":1}}}"#,
            #"{"app":"legacy","token":"\#(Self.tokenA)","payload":{},"priority":5,"expiration":17,"collapse_id":"c","topic":"t","environment":"sandbox","apns_id":"0E9C3B44-1B8A-4E5B-9C0D-7A1B2C3D4E5F","push_type":"alert"}"#,
        ].map { Array($0.utf8) }
        let specials = Array(#"{}[]":,\"0123456789-.eE nul"#.utf8) + [0x7F, 0x09, 0xC3, 0xA9, 0x00, 0xFF]
        var random = SeededGenerator(seed: 0xFA57)
        var taken = 0, requests = 0
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0...Int(random.next() % 3) {
                let position = Int(random.next() % UInt64(bytes.count + 1))
                let byte = specials[Int(random.next() % UInt64(specials.count))]
                switch random.next() % 4 {
                case 0 where position < bytes.count: bytes[position] = byte
                case 1 where position < bytes.count: bytes.remove(at: position)
                case 2: bytes.insert(byte, at: position)
                default: bytes = Array(bytes.prefix(position))
                }
            }
            for decoder in decoders {
                let expected = decoder.decodeInGeneral(value: bytes, source: Self.source)
                if case .request(let request) = expected, request.invalidTokens.isEmpty { requests += 1 }
                if let request = bytes.withUnsafeBufferPointer({ try? decoder.decodeCommonShape($0, source: Self.source) }) {
                    taken += 1
                    #expect(expected == .request(request), "\(String(decoding: bytes, as: UTF8.self))")
                }
                #expect(decoder.decode(value: bytes, source: Self.source) == expected)
            }
        }
        // Many mutations leave a valid request with well-formed tokens (a digit in the payload, a
        // space between members): the fast path must have taken most of those.
        #expect(requests > 1_000 && taken * 4 > requests * 3, "the fast path took \(taken) of \(requests) requests with well-formed tokens")
    }
}
