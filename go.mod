module github.com/pab-dev/pab

go 1.26.0

require (
	github.com/andybalholm/brotli v1.3.0
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/elazarl/goproxy v1.9.3
	github.com/klauspost/compress v1.20.4
	github.com/nlnwa/gowarc/v3 v3.1.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/net v0.62.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/bits-and-blooms/bitset v1.24.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/nlnwa/whatwg-url v0.6.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/text v0.43.0 // indirect
)
