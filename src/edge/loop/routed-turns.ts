/**
 * Whether each recent conversation's last turn routed, by its key (the request's `conversation`): what
 * `--cloud-prefill auto` reads on the conversation's next turn (cloud-prefill.ts). Kept by the box.
 *
 * @example
 * turns.remember('chat-42', true);
 * turns.get('chat-42'); // true
 */

/** Conversations remembered: the most recent ones, enough for a box's open chats. */
const MAX_TURNS = 4096;

export class RoutedTurns {
  private readonly turns = new Map<string, boolean>();

  get(conversation: string | undefined): boolean | undefined {
    return conversation === undefined ? undefined : this.turns.get(conversation);
  }

  remember(conversation: string, routed: boolean): void {
    this.turns.delete(conversation);
    this.turns.set(conversation, routed);
    if (this.turns.size > MAX_TURNS) this.turns.delete(this.turns.keys().next().value!);
  }
}
