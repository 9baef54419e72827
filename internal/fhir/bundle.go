package fhir

// Bundle is a FHIR searchset Bundle, the answer to every search and list.
type Bundle struct {
	ResourceType string        `json:"resourceType"`
	Type         string        `json:"type"`
	Total        int           `json:"total"`
	Entry        []BundleEntry `json:"entry,omitempty"`
}

// BundleEntry holds one resource of a Bundle.
type BundleEntry struct {
	FullURL  string `json:"fullUrl,omitempty"`
	Resource any    `json:"resource"`
}

// NewSearchBundle wraps resources in a searchset Bundle.
func NewSearchBundle[T any](resources []T) *Bundle {
	b := &Bundle{ResourceType: "Bundle", Type: "searchset", Total: len(resources)}
	for _, r := range resources {
		b.Entry = append(b.Entry, BundleEntry{Resource: r})
	}
	return b
}
