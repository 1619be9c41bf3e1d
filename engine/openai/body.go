package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"
)

// spliceMin is the message length from which a message's content is written
// into the request body by spliceContents rather than by go-openai's
// encoder, which makes about nine copies of it on the way (the message's own
// MarshalJSON, the outer encoder's compaction of it, buffer growth, the final
// copy): tens of megabytes of garbage per call of a prompt that holds a long
// document.
const spliceMin = 64 << 10

// withPlaceholders replaces the content of every long message of creq by a
// token that cannot occur elsewhere in the body, and returns the contents by
// token, to be spliced in by spliceContents.
func withPlaceholders(creq goopenai.ChatCompletionRequest) (goopenai.ChatCompletionRequest, map[string]string) {
	var contents map[string]string
	var msgs []goopenai.ChatCompletionMessage
	for i, m := range creq.Messages {
		if len(m.Content) < spliceMin {
			continue
		}
		if contents == nil {
			contents = map[string]string{}
			msgs = append([]goopenai.ChatCompletionMessage(nil), creq.Messages...)
		}
		token := placeholder(i)
		contents[token] = m.Content
		msgs[i].Content = token
	}
	if contents != nil {
		creq.Messages = msgs
	}
	return creq, contents
}

func placeholder(i int) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read does not fail
	return fmt.Sprintf("rulevalidator-content-%s-%d", hex.EncodeToString(nonce[:]), i)
}

// rewriteBody replaces req's body with what rewrite makes of it.
func rewriteBody(req *http.Request, rewrite func(raw []byte) ([]byte, error)) error {
	if req.Body == nil {
		return nil
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return err
	}
	out, err := rewrite(raw)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.ContentLength = int64(len(out))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	return nil
}

// spliceContents writes each content into req's body where its token stands,
// JSON-escaped, into a buffer of the exact size.
func spliceContents(req *http.Request, contents map[string]string) error {
	return rewriteBody(req, func(raw []byte) ([]byte, error) { return splice(raw, contents) })
}

func splice(raw []byte, contents map[string]string) ([]byte, error) {
	size := len(raw)
	for token, content := range contents {
		if bytes.Count(raw, []byte(`"`+token+`"`)) != 1 {
			return nil, fmt.Errorf("openai: request body does not hold the placeholder of a message exactly once")
		}
		size += escapedLen(content) - len(token)
	}
	out := make([]byte, 0, size)
	rest := raw
	for len(rest) > 0 {
		at := bytes.Index(rest, []byte(`"rulevalidator-content-`))
		if at < 0 {
			out = append(out, rest...)
			break
		}
		end := bytes.IndexByte(rest[at+1:], '"')
		content, ok := "", false
		if end >= 0 {
			content, ok = contents[string(rest[at+1:at+1+end])]
		}
		if !ok {
			out = append(out, rest[:at+1]...)
			rest = rest[at+1:]
			continue
		}
		out = append(out, rest[:at+1]...)
		out = appendEscaped(out, content)
		rest = rest[at+1+end:] // from the closing quote
	}
	return out, nil
}

// appendEscaped appends s as the inside of a JSON string: quotes,
// backslashes and control characters escaped, invalid UTF-8 as U+FFFD, and
// U+2028 and U+2029 escaped, as encoding/json writes them (HTML characters
// are left as they are).
func appendEscaped(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			switch r {
			case utf8.RuneError:
				dst = append(dst, `\ufffd`...)
			default:
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// escapedLen is len(appendEscaped(nil, s)).
func escapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
