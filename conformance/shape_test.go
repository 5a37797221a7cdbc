package conformance

import "testing"

// errorShape takes OpenAI's error object (param and code a string or null)
// and still refuses anything else (CONTRACT.md err.shape).
func TestErrorShape(t *testing.T) {
	for _, ok := range []string{
		`{"error":{"message":"m","type":"t","param":null,"code":null}}`,
		`{"error":{"message":"m","type":"t","param":"model","code":"wrong_task"}}`,
	} {
		if err := errorShape([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{"error":{"message":"m","type":"t","code":null}}`,                        // no param
		`{"error":{"message":"m","type":"t","param":null}}`,                       // no code
		`{"error":{"message":"m","type":"t","param":null,"code":3}}`,              // code not a string
		`{"error":{"message":"m","type":"t","param":{},"code":null}}`,             // param not a string
		`{"error":{"message":null,"type":"t","param":null,"code":null}}`,          // message null
		`{"error":{"message":"m","type":"t","param":null,"code":null,"extra":1}}`, // more fields
		`{"error":{"message":"m","type":"t","param":null,"code":null},"x":1}`,     // more than error
		`[]`, `not json`,
	} {
		if err := errorShape([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
