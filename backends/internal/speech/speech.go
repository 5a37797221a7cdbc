// Package speech holds the short spoken commands the engine checks and the
// engines' own tests speak with flite: one list, for packages that cannot
// import backends/engines (it imports them).
package speech

// Commands returns the commands (a new slice each call).
func Commands() []string {
	return []string{
		"Turn on the kitchen lights.",
		"Set a timer for ten minutes.",
		"What is the weather like today?",
		"Open the garage door.",
		"Play some music in the living room.",
		"Call my sister at six o'clock.",
	}
}
