extension String {
    /// Runs `body` over the string's UTF-8 bytes in place, without the copy of the string that
    /// `var copy = self; copy.withUTF8` makes (a retain and a release per call, on paths that
    /// read a few strings per notification). A string without contiguous UTF-8 storage (one
    /// bridged from elsewhere) is made contiguous in a copy first.
    @inlinable
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return copy.withUTF8(body)
    }
}
