package request

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// keyFile names a document's file on the local disk: read by the CLI
// (validate, produce) into data, never by the service.
const keyFile = "file"

// ReadFiles reads the documents of m (a request's or its inputs' decoded
// JSON) that name a local file ({"file": "contract.pdf", ...}) into the
// form the service takes, the file itself in base64 ({"data": ...}), named
// by the file's base name unless the document has a name. Relative paths are
// read from dir. files are further files to judge as primary documents, as
// validate --document gives them (relative to the working directory). A file over maxBytes, or one that cannot be
// read, is a problem named by its field; every problem is one
// *schemas.RequestError. The service refuses "file": it reads no local
// files.
func ReadFiles(m map[string]any, dir string, files []string, maxBytes int64) error {
	var p problems
	if len(files) > 0 {
		docs, _ := m["primary_docs"].([]any)
		if v, ok := m["primary_docs"]; ok && docs == nil && v != nil {
			p.typeErr("primary_docs", "an array of documents", v)
			return p.err("")
		}
		for _, f := range files {
			// Given on the command line: relative to the working directory, not to dir.
			abs, err := filepath.Abs(f)
			if err != nil {
				p.add("--document", "%s: %v", f, err)
				continue
			}
			docs = append(docs, map[string]any{keyFile: abs, "name": filepath.Base(f)})
		}
		m["primary_docs"] = docs
	}
	for _, field := range []string{"primary_docs", "auxiliary_docs"} {
		docs, _ := m[field].([]any)
		for i, d := range docs {
			doc, ok := d.(map[string]any)
			if !ok {
				continue
			}
			raw, ok := doc[keyFile]
			if !ok {
				continue
			}
			where := fmt.Sprintf("%s[%d].%s", field, i, keyFile)
			path, ok := raw.(string)
			if !ok || path == "" {
				p.typeErr(where, "a file's path", raw)
				continue
			}
			if _, has := doc[keyData]; has {
				p.add(where, "a document is given once: its file (file or data), its text (content or pages) or a uri")
				continue
			}
			data, err := readLocalFile(dir, path, maxBytes)
			if err != nil {
				p.add(where, "%v", err)
				continue
			}
			delete(doc, keyFile)
			doc[keyData] = base64.StdEncoding.EncodeToString(data)
			if !hasAny(doc, documentNameKeys) {
				doc["name"] = filepath.Base(path)
			}
		}
	}
	return p.err("")
}

func readLocalFile(dir, path string, maxBytes int64) ([]byte, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if maxBytes > 0 && info.Size() > maxBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d bytes (--document-max-bytes)", path, info.Size(), maxBytes)
	}
	return os.ReadFile(path)
}

func hasAny(m map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
